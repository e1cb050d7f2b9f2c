/*
 * pretokenize_block.h — the pre-tokenizer's block splitter: the piece starts
 * of 64 bytes of text at once, from bit masks of character classes.
 *
 * The per-piece shortcut (pretokenize_ascii.h) decides one piece at a time,
 * and each piece costs a few hard-to-predict branches (which alternative,
 * where its run ends).  Here a window of 64 bytes that starts at a piece
 * start is classified at once (SSE2 or AVX2, chosen at run time, or a
 * portable loop: the same masks on every machine), one 64-bit mask per class
 * (bit i: byte i of the window), and the starts of all its pieces come out of
 * a few dozen mask operations: the patterns' alternatives restated as
 * relations between neighbouring bytes.  The encoder then takes the pieces
 * off the mask one count-trailing-zeros at a time (tki_piece_cursor).
 *
 * Characters of more than one byte (Chinese, Cyrillic, "，") are classified
 * from the Unicode tables and the relations applied to one bit per character
 * ("wider characters" below); this comment speaks of ASCII, where a byte is a
 * character.
 *
 * Why it is exact.  A pattern's match at a piece start depends on the text
 * from there on only (no look-behind), so a window that starts at a piece
 * start sees everything that decides the pieces in it, up to its first
 * character that it cannot classify, or the window's end.  A start at
 * i is decided by the bytes up to i + 1, or i + 2 at an apostrophe (o200k: it
 * joins the word before when two more bytes make a contraction), and a
 * whitespace run by all of it and the byte after; starts past what their bytes allow are not
 * handed out, and the window after starts at the last start handed out.
 * Where a window decides no piece (a character it cannot classify at its
 * start, or a piece longer than the window), the per-piece matcher splits
 * (tki_pretokenize_next), and nearby pieces too, so that text the windows
 * cannot classify does not pay for windows that decide nothing.
 * tki_pretokenize (every test and fuzz run of the pre-tokenizer against the
 * `regex` package) goes through the cursor, and tests/fuzz/fuzz_pretokenize.c
 * compares it with the per-piece matcher on every input.
 *
 * The relations, for the cases of a start s (bit i of mask X is X[i]; prev(X)
 * is X one byte later, next(X) one byte earlier; O is an ASCII byte of no
 * letter, number or space class, WS a space class byte, NL CR or LF, S = WS
 * without NL, SP the space):
 *   - a letter after a non-letter that is no prefix (cl100k/o200k: an S, or
 *     an O that starts its run, before a letter joins it; r50k: a space);
 *     o200k: also a capital after a small letter (U*W+ | U+W*);
 *   - a prefix itself; an O that starts its run (no O, no space before);
 *   - a digit after a non-digit (r50k: not after a space), and cl100k/o200k
 *     every third digit of a run (\p{N}{1,3});
 *   - after a contraction ('s, 't, 're, 've, 'm, 'll, 'd): cl100k/r50k at an
 *     apostrophe that starts a piece, o200k after a word (C? joins it);
 *   - whitespace: where a run starts (cl100k/o200k: not in the CR/LF run that
 *     " ?O++[\r\n]*" takes after an O run, o200k's "[\r\n/]*" with slashes),
 *     after the run's last CR/LF (\s*[\r\n]), at its last byte before a
 *     non-space (\s+(?!\S)); a run that ends the text (cl100k/r50k: \s++$)
 *     is one piece from where it starts.
 */
#ifndef TIKTOKEN_INC_PRETOKENIZE_BLOCK_H
#define TIKTOKEN_INC_PRETOKENIZE_BLOCK_H

#include <string.h>

#include "internal.h"
#include "pretokenize_ascii.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(TKI_NO_SIMD)
#define TKI_BLOCK_AVX2 1
#include <immintrin.h>
#endif

enum {
    TKI_BLOCK_BYTES = 64,          /* a window: one bit of a mask per byte              */
    TKI_BLOCK_MAX_SCALAR_SPAN = 4096, /* the most bytes left to the per-piece matcher
                                       after windows that decided nothing (below)      */
    TKI_BLOCK_MIN_PIECES = 2         /* a window deciding fewer pays less than it costs  */
};

/* One window's bytes, by class (bit i: byte i).  Bytes past the text are in none. */
typedef struct tki_block_classes {
    uint64_t valid;      /* inside the text                                   */
    uint64_t high;       /* >= 0x80: not classified here                      */
    uint64_t letter;     /* [A-Za-z]                                          */
    uint64_t upper;      /* [A-Z]                                             */
    uint64_t number;     /* [0-9]                                             */
    uint64_t space;      /* \s: \t \n \v \f \r and ' '                         */
    uint64_t newline;    /* \r \n                                             */
    uint64_t blank;      /* ' '                                               */
    uint64_t apostrophe; /* '                                                 */
    uint64_t slash;      /* /                                                 */
} tki_block_classes;

/* The bytes (characters, once compressed) of no class: inside the text, classified, and no
 * letter, number or space ("O" below). */
static inline uint64_t tki_block_other(const tki_block_classes *c) {
    return c->valid & ~(c->letter | c->number | c->space | c->high);
}

/* ------------------------------------------------------------------ classifying */

/* The classes of bytes[0..64) (all readable), the portable way: a byte at a time. */
static inline void tki_block_classify_portable(const uint8_t *bytes, tki_block_classes *c) {
    memset(c, 0, sizeof(*c));
    for (uint32_t i = 0; i < TKI_BLOCK_BYTES; i++) {
        const uint8_t b = bytes[i];
        const uint64_t bit = (uint64_t)1 << i;
        const uint8_t folded = (uint8_t)(b | 0x20);
        c->high |= b >= 0x80 ? bit : 0;
        c->letter |= (uint8_t)(folded - 'a') < 26 && b < 0x80 ? bit : 0;
        c->upper |= (uint8_t)(b - 'A') < 26 ? bit : 0;
        c->number |= (uint8_t)(b - '0') < 10 ? bit : 0;
        c->space |= (uint8_t)(b - '\t') < 5 || b == ' ' ? bit : 0;
        c->newline |= b == '\r' || b == '\n' ? bit : 0;
        c->blank |= b == ' ' ? bit : 0;
        c->apostrophe |= b == '\'' ? bit : 0;
        c->slash |= b == '/' ? bit : 0;
    }
}

#if defined(TKI_SSE2)
/* x in [lo, lo + span] as a byte mask (unsigned, wrapping: lo + span <= 0xFF). */
static TKI_ALWAYS_INLINE __m128i tki_bytes_in_range(__m128i x, uint8_t lo, uint8_t span) {
    __m128i shifted = _mm_sub_epi8(x, _mm_set1_epi8((char)lo));
    return _mm_cmpeq_epi8(_mm_min_epu8(shifted, _mm_set1_epi8((char)span)), shifted);
}

/* The classes of sixteen bytes, as the low 16 bits of each mask. */
static TKI_ALWAYS_INLINE tki_block_classes tki_classify16_sse2(const uint8_t *bytes) {
    const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)bytes);
    const __m128i folded = _mm_or_si128(x, _mm_set1_epi8(0x20));
    const __m128i blank = _mm_cmpeq_epi8(x, _mm_set1_epi8(' '));
    const __m128i newline = _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\n')),
                                         _mm_cmpeq_epi8(x, _mm_set1_epi8('\r')));
    tki_block_classes c;
#define TKI_MASK_OF(v) ((uint64_t)(uint32_t)_mm_movemask_epi8(v))
    c.valid = 0;
    c.high = TKI_MASK_OF(x);
    c.letter = TKI_MASK_OF(tki_bytes_in_range(folded, 'a', 25));
    c.upper = TKI_MASK_OF(tki_bytes_in_range(x, 'A', 25));
    c.number = TKI_MASK_OF(tki_bytes_in_range(x, '0', 9));
    c.space = TKI_MASK_OF(_mm_or_si128(tki_bytes_in_range(x, '\t', 4), blank));
    c.newline = TKI_MASK_OF(newline);
    c.blank = TKI_MASK_OF(blank);
    c.apostrophe = TKI_MASK_OF(_mm_cmpeq_epi8(x, _mm_set1_epi8('\'')));
    c.slash = TKI_MASK_OF(_mm_cmpeq_epi8(x, _mm_set1_epi8('/')));
#undef TKI_MASK_OF
    return c;
}

/* Masks of four parts of `width` bits each joined into one (the first part lowest). */
#define TKI_JOIN4(field, a, b, d, e, width) \
    ((a).field | (b).field << (width) | (d).field << (2 * (width)) | (e).field << (3 * (width)))

/* The classes of bytes[0..64) with SSE2 (every x86-64): sixteen bytes per compare. */
static inline tki_block_classes tki_block_classify_sse2(const uint8_t *bytes) {
    const tki_block_classes a = tki_classify16_sse2(bytes), b = tki_classify16_sse2(bytes + 16);
    const tki_block_classes d = tki_classify16_sse2(bytes + 32), e = tki_classify16_sse2(bytes + 48);
    tki_block_classes c;
    c.valid = 0;
    c.high = TKI_JOIN4(high, a, b, d, e, 16);
    c.letter = TKI_JOIN4(letter, a, b, d, e, 16);
    c.upper = TKI_JOIN4(upper, a, b, d, e, 16);
    c.number = TKI_JOIN4(number, a, b, d, e, 16);
    c.space = TKI_JOIN4(space, a, b, d, e, 16);
    c.newline = TKI_JOIN4(newline, a, b, d, e, 16);
    c.blank = TKI_JOIN4(blank, a, b, d, e, 16);
    c.apostrophe = TKI_JOIN4(apostrophe, a, b, d, e, 16);
    c.slash = TKI_JOIN4(slash, a, b, d, e, 16);
    return c;
}
#endif

#if defined(TKI_BLOCK_AVX2)
__attribute__((target("avx2"))) static inline __m256i tki_bytes_in_range_avx2(__m256i x, uint8_t lo,
                                                                              uint8_t span) {
    __m256i shifted = _mm256_sub_epi8(x, _mm256_set1_epi8((char)lo));
    return _mm256_cmpeq_epi8(_mm256_min_epu8(shifted, _mm256_set1_epi8((char)span)), shifted);
}

/* The classes of thirty-two bytes, as the low 32 bits of each mask. */
__attribute__((target("avx2"))) static inline tki_block_classes tki_classify32_avx2(const uint8_t *bytes) {
    const __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)bytes);
    const __m256i folded = _mm256_or_si256(x, _mm256_set1_epi8(0x20));
    const __m256i blank = _mm256_cmpeq_epi8(x, _mm256_set1_epi8(' '));
    const __m256i newline = _mm256_or_si256(_mm256_cmpeq_epi8(x, _mm256_set1_epi8('\n')),
                                            _mm256_cmpeq_epi8(x, _mm256_set1_epi8('\r')));
    tki_block_classes c;
#define TKI_MASK_OF(v) ((uint64_t)(uint32_t)_mm256_movemask_epi8(v))
    c.valid = 0;
    c.high = TKI_MASK_OF(x);
    c.letter = TKI_MASK_OF(tki_bytes_in_range_avx2(folded, 'a', 25));
    c.upper = TKI_MASK_OF(tki_bytes_in_range_avx2(x, 'A', 25));
    c.number = TKI_MASK_OF(tki_bytes_in_range_avx2(x, '0', 9));
    c.space = TKI_MASK_OF(_mm256_or_si256(tki_bytes_in_range_avx2(x, '\t', 4), blank));
    c.newline = TKI_MASK_OF(newline);
    c.blank = TKI_MASK_OF(blank);
    c.apostrophe = TKI_MASK_OF(_mm256_cmpeq_epi8(x, _mm256_set1_epi8('\'')));
    c.slash = TKI_MASK_OF(_mm256_cmpeq_epi8(x, _mm256_set1_epi8('/')));
#undef TKI_MASK_OF
    return c;
}

/* The same with AVX2: thirty-two bytes per compare. */
__attribute__((target("avx2"))) static tki_block_classes tki_block_classify_avx2(const uint8_t *bytes) {
    const tki_block_classes a = tki_classify32_avx2(bytes), b = tki_classify32_avx2(bytes + 32);
    tki_block_classes c;
    c.valid = 0;
    c.high = a.high | b.high << 32;
    c.letter = a.letter | b.letter << 32;
    c.upper = a.upper | b.upper << 32;
    c.number = a.number | b.number << 32;
    c.space = a.space | b.space << 32;
    c.newline = a.newline | b.newline << 32;
    c.blank = a.blank | b.blank << 32;
    c.apostrophe = a.apostrophe | b.apostrophe << 32;
    c.slash = a.slash | b.slash << 32;
    return c;
}
#endif

/*
 * The classes of the `valid` bytes of a window of 64 readable bytes, zero
 * past `valid` (1 <= valid <= 64).  AVX2 where the processor has it, else
 * SSE2 (x86-64), else the portable loop; the masks are the same.
 */
static inline void tki_block_classify_window(const uint8_t *bytes, uint32_t valid, tki_block_classes *c) {
#if defined(TKI_BLOCK_AVX2)
    *c = __builtin_cpu_supports("avx2") ? tki_block_classify_avx2(bytes) : tki_block_classify_sse2(bytes);
#elif defined(TKI_SSE2)
    *c = tki_block_classify_sse2(bytes);
#else
    tki_block_classify_portable(bytes, c);
#endif
    c->valid = valid < TKI_BLOCK_BYTES ? ((uint64_t)1 << valid) - 1 : ~(uint64_t)0;
}

/* The same for the `valid` bytes at data, read as a zero-padded copy when valid < 64. */
static inline void tki_block_classify(const uint8_t *data, uint32_t valid, tki_block_classes *c) {
    uint8_t padded[TKI_BLOCK_BYTES];
    const uint8_t *bytes = data;
    if (valid < TKI_BLOCK_BYTES) {
        memset(padded, 0, sizeof(padded));
        memcpy(padded, data, valid);
        bytes = padded;
    }
    tki_block_classify_window(bytes, valid, c);
}

/* ------------------------------------------------------------------ wider characters */

static inline uint64_t tki_prev(uint64_t x) { return x << 1; }
static inline uint64_t tki_next(uint64_t x) { return x >> 1; }
static inline uint32_t tki_lowest(uint64_t x) { return (uint32_t)__builtin_ctzll(x); }

/*
 * A window with characters of two to four bytes (Chinese, Japanese, Cyrillic,
 * punctuation such as "，" or "“").  Their classes come from the generated
 * tables, a character at a time (CJK ideographs, and with AVX2 two-byte
 * letters whose group of sixteen code points is all alike, a window at a
 * time), and go to the character's first byte; its other bytes are marked as
 * continuation bytes.  The relations below are between neighbouring
 * characters (in ASCII, neighbouring bytes), so the masks are then compressed
 * to one bit per character (the continuation bits taken out), the starts
 * computed there and spread back to the bytes.
 *
 * A character stays unknown (high), and the window decides nothing from it
 * on, when it is no valid UTF-8 whole inside the window, or when it is U+017F
 * (long s: (?i:'s) takes "'ſ", and tki_block_contractions reads ASCII).
 *
 * With o200k's pattern a mark (\p{M}: the vowel signs of Indic scripts, the
 * accents of decomposed Latin, kana's voicing marks) is in the letter classes
 * of U*W+ and U+W*, yet no letter for [^\r\n\p{L}\p{N}]? and
 * " ?[^\s\p{L}\p{N}]+".  Where the character before it is a letter, a
 * number, a space, or none (a piece start), no alternative can take it but
 * as a letter of a word, so it is a letter of both U and W here, as Lo is
 * (the prefix alternative that would take it, [^\r\n\p{L}\p{N}]? before
 * U*W+, gives the same piece).  Right after an O character it may instead
 * continue a run of O ("((" then a mark: one piece), so such a mark is
 * unknown (*marks: the marks, for the caller to test after compressing).
 *
 * Letters go to `letter`, and with o200k's pattern the capitals (Lu, Lt: U
 * only) to `upper` too; those in both U and W (Lo, Lm: an ideograph) are
 * small letters for the relations.  That gives regex's pieces wherever no
 * such letter comes right before a capital.  In a run of letters from a
 * piece start, let u be the first letter not in U: if u is a small letter
 * (W only), U*W+ takes the run up to the first capital after u, as the
 * relations do; if the run ends before any, U*W+ ends right after the last
 * letter of both classes, or fails and U+W* takes the run: with no capital
 * right after a letter of both, both are the run's end, as the relations
 * say.  Right before a capital (in "中Ab" U* takes "中A", in "中AB " the
 * piece is "中", so it depends on what follows the capitals) that capital is
 * unknown (*both_classes: those letters, for the caller to test after
 * compressing).  Numbers, spaces and the rest (no class: "other") are as in
 * ASCII; a wide number is one character of \p{N}{1,3}, a wide space one of
 * a run.
 */

/*
 * The first bytes of the CJK ideographs of the window (pretokenize_tables.h:
 * a lead 0xE4..0xE9, two continuation bytes, not the hexagram symbols),
 * sixteen bytes per compare with SSE2; those of them the window cuts are not
 * among them.  *continuation_bytes: the window's bytes 0x80..0xBF;
 * *three_byte_leads: its bytes 0xE0..0xEF.
 */
static inline uint64_t tki_block_ideographs(const uint8_t *bytes, uint64_t *continuation_bytes,
                                            uint64_t *three_byte_leads) {
#if defined(TKI_SSE2)
    uint64_t lead = 0, continuation = 0, e4 = 0, b7 = 0, three = 0;
    for (uint32_t part = 0; part < TKI_BLOCK_BYTES; part += 16) {
        const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(bytes + part));
        lead |= (uint64_t)(uint32_t)_mm_movemask_epi8(tki_bytes_in_range(x, 0xE4, 5)) << part;
        three |= (uint64_t)(uint32_t)_mm_movemask_epi8(tki_bytes_in_range(x, 0xE0, 15)) << part;
        continuation |= (uint64_t)(uint32_t)_mm_movemask_epi8(tki_bytes_in_range(x, 0x80, 0x3F)) << part;
        e4 |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8((char)0xE4))) << part;
        b7 |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8((char)0xB7))) << part;
    }
    *continuation_bytes = continuation;
    *three_byte_leads = three;
    return lead & tki_next(continuation) & tki_next(tki_next(continuation)) & ~(e4 & tki_next(b7));
#else
    uint64_t ideographs = 0, continuation = 0, three = 0;
    for (uint32_t i = 0; i < TKI_BLOCK_BYTES; i++) {
        continuation |= (bytes[i] & 0xC0u) == 0x80u ? (uint64_t)1 << i : 0;
        three |= (bytes[i] & 0xF0u) == 0xE0u ? (uint64_t)1 << i : 0;
        ideographs |= i + 3 <= TKI_BLOCK_BYTES && tki_is_ideograph(bytes + i) ? (uint64_t)1 << i : 0;
    }
    *continuation_bytes = continuation;
    *three_byte_leads = three;
    return ideographs;
#endif
}

#if defined(TKI_BLOCK_AVX2)
/*
 * The two-byte characters of thirty-two window bytes x (the byte after each
 * in `after`) that a group of tki_two_byte_groups classifies: their first
 * bytes, and those that are capitals and letters of both U and W.  A group's
 * code is one byte shuffle of the first byte's low nibble in each of eight
 * tables, chosen by bit 4 of the first byte and bits 4..5 of the second.
 */
__attribute__((target("avx2"))) static inline uint32_t tki_two_byte_groups32(__m256i x, __m256i after,
                                                                            const __m256i *groups,
                                                                            uint32_t *capital, uint32_t *both) {
    const __m256i low = _mm256_and_si256(x, _mm256_set1_epi8(0x0F));
    const __m256i bit4_after = _mm256_slli_epi16(after, 3), bit5_after = _mm256_slli_epi16(after, 2);
    const __m256i bit4 = _mm256_slli_epi16(x, 3); /* (each byte's bit in its top bit, for the blends) */
    __m256i by_second[2];
    for (uint32_t high_half = 0; high_half < 2; high_half++) {
        const __m256i *g = groups + 4 * high_half;
        const __m256i second_low = _mm256_blendv_epi8(_mm256_shuffle_epi8(g[0], low), _mm256_shuffle_epi8(g[1], low),
                                                      bit4_after);
        const __m256i second_high = _mm256_blendv_epi8(_mm256_shuffle_epi8(g[2], low),
                                                       _mm256_shuffle_epi8(g[3], low), bit4_after);
        by_second[high_half] = _mm256_blendv_epi8(second_low, second_high, bit5_after);
    }
    const __m256i valid = _mm256_and_si256(tki_bytes_in_range_avx2(x, 0xC2, 0x1D),
                                           tki_bytes_in_range_avx2(after, 0x80, 0x3F));
    const __m256i code = _mm256_and_si256(_mm256_blendv_epi8(by_second[0], by_second[1], bit4), valid);
    *capital = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(code, _mm256_set1_epi8(TKI_GROUP_CAPITAL)));
    *both = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(code, _mm256_set1_epi8(TKI_GROUP_BOTH)));
    return ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(code, _mm256_setzero_si256()));
}

/*
 * The window's two-byte characters that a group classifies (most letters of
 * Cyrillic, Greek, Arabic and Hebrew text), with AVX2: their first bytes; in
 * *capital and *both those of o200k's capitals and letters of both U and W
 * (none without `o200k`).  No byte past the window is read: a character that
 * its last byte starts is not among them.
 */
__attribute__((target("avx2"))) static uint64_t tki_block_two_byte_avx2(const uint8_t *bytes, int o200k,
                                                                       uint64_t *capital, uint64_t *both) {
    __m256i groups[8];
    for (uint32_t k = 0; k < 8; k++) {
        groups[k] = _mm256_broadcastsi128_si256(
            _mm_loadu_si128((const __m128i *)(const void *)tki_two_byte_groups[o200k ? 1 : 0][k]));
    }
    const __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)bytes);
    const __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(bytes + 32));
    /* each byte's next: the window moved down a byte across the lanes, zero after the last */
    const __m256i after0 = _mm256_alignr_epi8(_mm256_permute2x128_si256(x0, x1, 0x21), x0, 1);
    const __m256i after1 = _mm256_alignr_epi8(_mm256_permute2x128_si256(x1, x1, 0x81), x1, 1);
    uint32_t capital0, capital1, both0, both1;
    const uint32_t first0 = tki_two_byte_groups32(x0, after0, groups, &capital0, &both0);
    const uint32_t first1 = tki_two_byte_groups32(x1, after1, groups, &capital1, &both1);
    *capital = capital0 | (uint64_t)capital1 << 32;
    *both = both0 | (uint64_t)both1 << 32;
    return first0 | (uint64_t)first1 << 32;
}
#endif

/* The masks a wider character's class goes to (on its first byte, `first`). */
typedef struct tki_wide_masks {
    uint64_t letter, upper, both, number, space, mark;
} tki_wide_masks;

static TKI_ALWAYS_INLINE void tki_wide_class(tki_wide_masks *m, uint8_t klass, uint64_t first, int o200k) {
    if (klass & TKI_CLASS_LETTER) {
        m->letter |= first;
        if (o200k) {
            m->upper |= (klass & TKI_CLASS_LOWER_LIKE) == 0 ? first : 0;
            m->both |= (klass & (TKI_CLASS_UPPER_LIKE | TKI_CLASS_LOWER_LIKE)) ==
                               (TKI_CLASS_UPPER_LIKE | TKI_CLASS_LOWER_LIKE) ? first : 0;
        }
    } else if (klass & TKI_CLASS_NUMBER) {
        m->number |= first;
    } else if (klass & TKI_CLASS_SPACE) {
        m->space |= first;
    } else if (o200k && (klass & (TKI_CLASS_UPPER_LIKE | TKI_CLASS_LOWER_LIKE)) != 0) {
        m->letter |= first; /* a mark: in both U and W (see above) */
        m->both |= first;
        m->mark |= first;
    }
}

/*
 * What tki_wide_class does with a class, as one of seven kinds, so that a loop
 * over many characters can collect each kind's first bytes in a mask of its
 * own (an array indexed by the kind: no branch on the class) and turn the
 * kinds into the classes' masks once (tki_wide_kinds_apply).  An eighth kind
 * holds the sequences that are no character, which stay unclassified.
 */
enum {
    TKI_WIDE_OTHER,        /* none of the masks                                  */
    TKI_WIDE_UPPER_LETTER, /* a letter not lower-like: a capital for o200k       */
    TKI_WIDE_LOWER_LETTER, /* a letter lower-like only                           */
    TKI_WIDE_BOTH_LETTER,  /* a letter upper- and lower-like (Lm, Lo)            */
    TKI_WIDE_NUMBER,
    TKI_WIDE_SPACE,
    TKI_WIDE_MARK,         /* no letter, number or space, yet upper- or lower-like */
    TKI_WIDE_INVALID,      /* no character (an overlong form, a surrogate): none */
    TKI_WIDE_KINDS
};
#define TKI_WIDE_KIND(klass)                                                                              \
    (((klass) & TKI_CLASS_LETTER)                                                                        \
         ? (((klass) & TKI_CLASS_LOWER_LIKE) == 0 ? TKI_WIDE_UPPER_LETTER                                \
            : ((klass) & TKI_CLASS_UPPER_LIKE)    ? TKI_WIDE_BOTH_LETTER                                 \
                                                  : TKI_WIDE_LOWER_LETTER)                               \
     : ((klass) & TKI_CLASS_NUMBER)                           ? TKI_WIDE_NUMBER                          \
     : ((klass) & TKI_CLASS_SPACE)                            ? TKI_WIDE_SPACE                           \
     : ((klass) & (TKI_CLASS_UPPER_LIKE | TKI_CLASS_LOWER_LIKE)) ? TKI_WIDE_MARK                         \
                                                              : TKI_WIDE_OTHER)
#define TKI_WIDE_KIND4(k) TKI_WIDE_KIND(k), TKI_WIDE_KIND(k + 1), TKI_WIDE_KIND(k + 2), TKI_WIDE_KIND(k + 3)
static const uint8_t tki_wide_kind_of_class[32] = {
    TKI_WIDE_KIND4(0),  TKI_WIDE_KIND4(4),  TKI_WIDE_KIND4(8),  TKI_WIDE_KIND4(12),
    TKI_WIDE_KIND4(16), TKI_WIDE_KIND4(20), TKI_WIDE_KIND4(24), TKI_WIDE_KIND4(28),
};
#undef TKI_WIDE_KIND4
#undef TKI_WIDE_KIND

/* The masks of each kind's characters, into m, as tki_wide_class would put them one by one. */
static inline void tki_wide_kinds_apply(tki_wide_masks *m, const uint64_t *by_kind, int o200k) {
    m->letter |= by_kind[TKI_WIDE_UPPER_LETTER] | by_kind[TKI_WIDE_LOWER_LETTER] | by_kind[TKI_WIDE_BOTH_LETTER];
    m->number |= by_kind[TKI_WIDE_NUMBER];
    m->space |= by_kind[TKI_WIDE_SPACE];
    if (o200k) {
        m->upper |= by_kind[TKI_WIDE_UPPER_LETTER];
        m->letter |= by_kind[TKI_WIDE_MARK]; /* a mark: in both U and W (see above) */
        m->both |= by_kind[TKI_WIDE_BOTH_LETTER] | by_kind[TKI_WIDE_MARK];
        m->mark |= by_kind[TKI_WIDE_MARK];
    }
}

/*
 * The classes of the window's wider characters, from its first high byte on,
 * into c (on each character's first byte; its bytes no longer high), up to
 * the first unknown one; the continuation bytes in *continuation, and with
 * `o200k` the letters of both U and W in *both_classes, of them the marks in
 * *marks.
 */
static inline void tki_block_classify_wide(const uint8_t *bytes, uint32_t valid, int o200k,
                                           tki_block_classes *c, uint64_t *continuation,
                                           uint64_t *both_classes, uint64_t *marks) {
    /* The ideographs (most of Chinese text) at once: letters of both U and W. */
    uint64_t continuation_bytes = 0, three_byte_leads = 0;
    const uint64_t ideographs = tki_block_ideographs(bytes, &continuation_bytes, &three_byte_leads);
    const uint64_t ideograph_bytes = ideographs | tki_prev(ideographs) | tki_prev(tki_prev(ideographs));
    tki_wide_masks m = {c->letter | ideographs, c->upper, o200k ? ideographs : 0, c->number, c->space, 0};
    uint64_t high = c->high & ~ideograph_bytes;
    uint64_t continuing = ideograph_bytes & ~ideographs;
#if defined(TKI_BLOCK_AVX2)
    /* Two-byte letters whose group says what they are, at once (the loop below would
     * classify each the same: the groups come from its tables), where the window looks
     * like it has two or more: first bytes with one continuation byte after them (a
     * window of Chinese text mostly has none, and its loop takes one alone for less). */
    const uint64_t two_byte_like = high & ~continuation_bytes & tki_next(continuation_bytes) &
                                   ~tki_next(tki_next(continuation_bytes));
    if ((two_byte_like & (two_byte_like - 1)) != 0 && __builtin_cpu_supports("avx2")) {
        uint64_t group_capital = 0, group_both = 0;
        const uint64_t grouped = tki_block_two_byte_avx2(bytes, o200k, &group_capital, &group_both);
        m.letter |= grouped;
        m.upper |= group_capital;
        m.both |= group_both;
        high &= ~(grouped | tki_prev(grouped));
        continuing |= tki_prev(grouped);
    }
#endif
    /* The other three-byte characters (kana, Hangul, the Indic scripts, Thai, "，"):
     * their first byte and two continuation bytes are known from the masks, so each
     * costs its code point, its class and its kind, with no decode and no branch on
     * the class: each kind's first bytes are collected, and the masks made from them
     * after the loop.  An overlong form or a surrogate (code point 0) stays high,
     * for the loop below (which stops there). */
    const uint64_t three_byte = high & three_byte_leads & tki_next(continuation_bytes) &
                                tki_next(tki_next(continuation_bytes));
    if (three_byte != 0) {
        uint64_t by_kind[TKI_WIDE_KINDS] = {0};
        for (uint64_t rest = three_byte; rest != 0; rest &= rest - 1) {
            const uint32_t at = tki_lowest(rest); /* (at + 2 < 64: its continuation bytes are in the window) */
            const uint32_t code_point = tki_three_byte_code_point(bytes + at);
            const uint32_t kind = code_point != 0 ? tki_wide_kind_of_class[tki_unicode_class(code_point) & 31u]
                                                  : TKI_WIDE_INVALID;
            by_kind[kind] |= (uint64_t)1 << at;
        }
        const uint64_t done = three_byte & ~by_kind[TKI_WIDE_INVALID];
        tki_wide_kinds_apply(&m, by_kind, o200k);
        high &= ~(done | tki_prev(done) | tki_prev(tki_prev(done)));
        continuing |= tki_prev(done) | tki_prev(tki_prev(done));
    }
    for (uint64_t rest = high; rest != 0;) {
        const uint32_t at = tki_lowest(rest);
        uint32_t code_point = 0;
        size_t width = tki_decode_two_or_three(bytes + at, valid - at, &code_point);
        if (width == 0) {
            width = tki_decode_four(bytes + at, valid - at, &code_point);
        }
        if (width == 0 || code_point == 0x17F) {
            break;
        }
        const uint64_t first = (uint64_t)1 << at;
        const uint64_t character = (((uint64_t)1 << width) - 1) << at; /* (at + width <= 64) */
        tki_wide_class(&m, tki_unicode_class(code_point), first, o200k);
        high &= ~character;
        continuing |= character & ~first;
        rest &= ~character;
    }
    c->letter = m.letter;
    c->upper = m.upper;
    c->number = m.number;
    c->space = m.space;
    c->high = high;
    *continuation = continuing;
    *both_classes = m.both;
    *marks = m.mark;
}

/*
 * Compressing a mask to the bits of `leads` (the first bytes of the
 * characters), and spreading one back: BMI2's PEXT and PDEP where they are
 * fast (not on AMD's processors before Zen 3, which run them in microcode),
 * else the portable way (Hacker's Delight, 7-4 and 7-5): six steps that
 * depend on `leads` alone, made once per window, then six shifts per mask.
 * Both give the same bits.
 */
typedef struct tki_char_plan {
    uint64_t leads;
    uint64_t moves[6];
} tki_char_plan;

static inline void tki_char_plan_make(tki_char_plan *plan, uint64_t leads) {
    uint64_t m = leads, zeros_before = ~leads << 1;
    plan->leads = leads;
    for (uint32_t i = 0; i < 6; i++) {
        uint64_t parity = zeros_before ^ (zeros_before << 1);
        parity ^= parity << 2;
        parity ^= parity << 4;
        parity ^= parity << 8;
        parity ^= parity << 16;
        parity ^= parity << 32;
        const uint64_t moving = parity & m;
        plan->moves[i] = moving;
        m = (m ^ moving) | (moving >> (1u << i));
        zeros_before &= ~parity;
    }
}

static inline uint64_t tki_char_compress(const tki_char_plan *plan, uint64_t x) {
    x &= plan->leads;
    for (uint32_t i = 0; i < 6; i++) {
        const uint64_t moving = x & plan->moves[i];
        x = (x ^ moving) | (moving >> (1u << i));
    }
    return x;
}

static inline uint64_t tki_char_expand(const tki_char_plan *plan, uint64_t x) {
    for (uint32_t i = 6; i-- > 0;) {
        const uint64_t moved = x << (1u << i);
        x = (x & ~plan->moves[i]) | (moved & plan->moves[i]);
    }
    return x & plan->leads;
}

/* The masks a window's starts are computed from, besides its classes: the apostrophes that
 * start a contraction of two and of three characters, the letters of both U and W, and of
 * them the marks. */
typedef struct tki_block_extra {
    uint64_t two, three, both, marks;
} tki_block_extra;

#define TKI_CHARS_OF_ALL(compress, c, extra)                                                      \
    do {                                                                                          \
        (c)->valid = compress((c)->valid);                                                        \
        (c)->high = compress((c)->high);                                                          \
        (c)->letter = compress((c)->letter);                                                      \
        (c)->upper = compress((c)->upper);                                                        \
        (c)->number = compress((c)->number);                                                      \
        (c)->space = compress((c)->space);                                                        \
        (c)->newline = compress((c)->newline);                                                    \
        (c)->blank = compress((c)->blank);                                                        \
        (c)->apostrophe = compress((c)->apostrophe);                                              \
        (c)->slash = compress((c)->slash);                                                        \
        (extra)->two = compress((extra)->two);                                                    \
        (extra)->three = compress((extra)->three);                                                \
        (extra)->both = compress((extra)->both);                                                  \
        (extra)->marks = compress((extra)->marks);                                                \
    } while (0)

#if defined(TKI_BLOCK_AVX2)
__attribute__((target("bmi2"))) static inline void tki_block_chars_bmi2(tki_block_classes *c,
                                                                       tki_block_extra *extra,
                                                                       uint64_t leads) {
#define TKI_COMPRESS(x) _pext_u64((x), leads)
    TKI_CHARS_OF_ALL(TKI_COMPRESS, c, extra);
#undef TKI_COMPRESS
}

__attribute__((target("bmi2"))) static inline uint64_t tki_char_expand_bmi2(uint64_t x, uint64_t leads) {
    return _pdep_u64(x, leads);
}

/* Whether PEXT and PDEP are there and fast. */
static inline int tki_fast_bmi2(void) {
    return __builtin_cpu_supports("bmi2") && !__builtin_cpu_is("amdfam15h") && !__builtin_cpu_is("amdfam17h");
}
#endif

/* The masks of c and extra, one bit per character (the first bytes `leads`); *plan is what
 * tki_block_bytes_of_chars takes back. */
static inline void tki_block_chars(tki_block_classes *c, tki_block_extra *extra, uint64_t leads,
                                   tki_char_plan *plan) {
    plan->leads = leads;
#if defined(TKI_BLOCK_AVX2)
    if (tki_fast_bmi2()) {
        tki_block_chars_bmi2(c, extra, leads);
        return;
    }
#endif
    tki_char_plan_make(plan, leads);
#define TKI_COMPRESS(x) tki_char_compress(plan, (x))
    TKI_CHARS_OF_ALL(TKI_COMPRESS, c, extra);
#undef TKI_COMPRESS
}

/* A mask of characters spread back to their first bytes (the plan of tki_block_chars). */
static inline uint64_t tki_block_bytes_of_chars(const tki_char_plan *plan, uint64_t x) {
#if defined(TKI_BLOCK_AVX2)
    if (tki_fast_bmi2()) {
        return tki_char_expand_bmi2(x, plan->leads);
    }
#endif
    return tki_char_expand(plan, x);
}

/* ------------------------------------------------------------------ the starts */

/*
 * The bits of `run` at or above a bit of `seeds` in the same run of ones,
 * when each seed is the lowest bit of its run: one carry through each run.
 */
static inline uint64_t tki_fill_up_from_run_starts(uint64_t seeds, uint64_t run) {
    return ((run + seeds) ^ run) & run;
}

/* The bits of `run` at or above a bit of `seeds` in the same run (any seeds). */
static inline uint64_t tki_fill_up(uint64_t seeds, uint64_t run) {
    uint64_t x = seeds & run, through = run;
    for (uint32_t shift = 1; shift < 64; shift *= 2) {
        x |= (x << shift) & through;
        through &= through << shift;
    }
    return x;
}

/* The bits of `run` at or below a bit of `seeds` in the same run. */
static inline uint64_t tki_fill_down(uint64_t seeds, uint64_t run) {
    uint64_t x = seeds & run, through = run;
    for (uint32_t shift = 1; shift < 64; shift *= 2) {
        x |= (x >> shift) & through;
        through &= through >> shift;
    }
    return x;
}

/* The run of ones of x that holds bit `top` (set in x), as a mask. */
static inline uint64_t tki_run_below(uint64_t x, uint32_t top) {
    uint64_t below = ~x & (((uint64_t)2 << top) - 1); /* (top 63: all bits) */
    uint32_t from = below == 0 ? 0 : 64 - (uint32_t)__builtin_clzll(below);
    return (((uint64_t)2 << top) - 1) & ~((((uint64_t)1) << from) - 1);
}

/* The apostrophes of the window that start a contraction: 's 't 'm 'd (*two) and 'll 've 're
 * (*three), ASCII case folded when `ignore_case`; bytes past the window count as none. */
static inline void tki_block_contractions(const uint8_t *bytes, uint32_t valid, uint64_t apostrophes,
                                          int ignore_case, uint64_t *two, uint64_t *three) {
    *two = *three = 0;
    for (uint64_t rest = apostrophes; rest != 0; rest &= rest - 1) {
        const uint32_t at = tki_lowest(rest);
        if (at + 1 >= valid) {
            continue;
        }
        const uint8_t fold = ignore_case ? 0x20 : 0;
        const uint8_t first = (uint8_t)(bytes[at + 1] | ((uint8_t)(bytes[at + 1] - 'A') < 26 ? fold : 0));
        if (first == 's' || first == 't' || first == 'd' || first == 'm') {
            *two |= (uint64_t)1 << at;
            continue;
        }
        if (at + 2 >= valid) {
            continue;
        }
        const uint8_t second = (uint8_t)(bytes[at + 2] | ((uint8_t)(bytes[at + 2] - 'A') < 26 ? fold : 0));
        if ((first == 'l' && second == 'l') || ((first == 'v' || first == 'r') && second == 'e')) {
            *three |= (uint64_t)1 << at;
        }
    }
}

/*
 * The piece starts of a window that starts at a piece start (bit 0, always
 * set), and in *decided the bits up to which they are exact (a mask of the
 * low bits; 0 when not even the first piece is decided).  Bit i is the
 * window's character i, of `valid` (bytes past them, or past the text, in no
 * class; characters past a window that does not end the text, high).
 * `ends_text`: the window holds the end of the text, so nothing after it can
 * change a piece.  `extra`: the contractions (tki_block_contractions).
 */
static TKI_ALWAYS_INLINE uint64_t tki_block_starts(int32_t pattern, const tki_block_classes *c,
                                                   uint32_t valid, int ends_text,
                                                   const tki_block_extra *extra, uint64_t *decided) {
    const int r50k = pattern == TKI_PATTERN_R50K, o200k = pattern == TKI_PATTERN_O200K;
    const uint64_t valid_bits = c->valid, letter = c->letter, number = c->number;
    const uint64_t space = c->space, newline = c->newline, blank = c->blank;
    const uint64_t other = tki_block_other(c);
    const uint64_t blanks_but_newlines = space & ~newline; /* S */
    const uint64_t two = extra->two, three = extra->three;
    uint64_t starts = 1, absorbed = 0, contraction2 = 0, contraction3 = 0;
    if (o200k) {
        /* " ?O+[\r\n/]*": the CR, LF and slashes right after an O run */
        const uint64_t seeds = newline & tki_prev(other);
        absorbed = seeds == 0 ? 0 : tki_fill_up(seeds, newline | c->slash);
        /* C? after a word: an apostrophe right after a letter (not one of a contraction) */
        uint64_t suffix = c->apostrophe & tki_prev(letter) & (two | three);
#define TKI_INSIDE(x) (tki_prev(x) | tki_prev(tki_prev((x) & three)))
        if ((suffix & tki_prev(TKI_INSIDE(suffix))) != 0) { /* one right after another: in order */
            uint64_t kept = 0;
            for (uint64_t rest = suffix; rest != 0; rest &= rest - 1) {
                const uint64_t bit = rest & (0 - rest);
                if ((tki_prev(TKI_INSIDE(kept)) & bit) == 0) {
                    kept |= bit;
                }
            }
            suffix = kept;
        }
#undef TKI_INSIDE
        contraction2 = suffix & two;
        contraction3 = suffix & three;
        const uint64_t other_start = other & ~(tki_prev(other) & ~tki_prev(absorbed)) &
                                     ~tki_prev(blank) & ~absorbed & ~suffix;
        const uint64_t prefix = (blanks_but_newlines & tki_next(letter)) | (other_start & tki_next(letter));
        starts |= letter & ~tki_prev(letter) & ~tki_prev(prefix) & ~tki_prev(suffix);
        starts |= c->upper & tki_prev(letter & ~c->upper); /* a capital after a small letter */
        starts |= prefix | other_start;
    } else if (!r50k) { /* cl100k */
        const uint64_t seeds = newline & tki_prev(other); /* "[\r\n]*+" after an O run */
        absorbed = seeds == 0 ? 0 : tki_fill_up_from_run_starts(seeds, newline);
        const uint64_t other_start = other & ~tki_prev(other) & ~tki_prev(blank);
        const uint64_t contraction = other_start & (two | three);
        contraction2 = contraction & two;
        contraction3 = contraction & three;
        const uint64_t prefix = (blanks_but_newlines & tki_next(letter)) |
                                (other_start & tki_next(letter) & ~contraction);
        starts |= letter & ~tki_prev(letter) & ~tki_prev(prefix) & ~tki_prev(contraction);
        starts |= prefix | other_start;
    } else { /* r50k: " ?" before letters, numbers and O runs only */
        const uint64_t other_start = other & ~tki_prev(other) & ~tki_prev(blank);
        const uint64_t contraction = other_start & (two | three);
        contraction2 = contraction & two;
        contraction3 = contraction & three;
        starts |= (letter | number) & ~tki_prev(letter | number | blank) & ~tki_prev(contraction);
        starts |= (letter & tki_prev(number)) | (number & tki_prev(letter));
        starts |= other_start | (blank & tki_next(letter | number | other));
    }
    if (!r50k && number != 0) { /* \p{N}{1,3}: a run's first digit, and every third after it */
        uint64_t threes = number & ~tki_prev(number);
        const uint64_t third_in_run = number & tki_prev(number) & tki_prev(tki_prev(number));
        if (third_in_run != 0) {
            for (uint64_t more = threes; more != 0;) {
                more = (more << 3) & third_in_run & ~threes;
                threes |= more;
            }
        }
        starts |= threes;
    }
    /* after a contraction; nothing inside it */
    starts |= (contraction2 << 2) | (contraction3 << 3);
    starts &= ~(tki_prev(contraction2 | contraction3) | (contraction3 << 2));
    /* whitespace */
    const uint64_t run_start = space & ~absorbed & ~(tki_prev(space) & ~tki_prev(absorbed));
    starts |= run_start;
    if (!r50k) {
        const uint64_t after_newline = blanks_but_newlines & tki_prev(newline);
        if (after_newline != 0) { /* \s*[\r\n]: after the run's last CR/LF */
            const uint64_t before_newline = tki_fill_down(newline, space);
            starts |= after_newline & (~before_newline | tki_prev(absorbed));
        }
        starts |= blanks_but_newlines & tki_next(valid_bits & ~space); /* \s+(?!\S) */
    } else {
        starts |= space & tki_next(valid_bits & ~space);
    }
    if (ends_text && !o200k && (space >> (valid - 1) & 1) != 0) { /* \s++$ */
        starts &= ~(tki_run_below(space, valid - 1) & ~run_start);
    }
    starts &= valid_bits;
    /* What is exact: below the first byte not classified (non-ASCII, or past a window that
     * does not end the text), less the bytes a start reads after it, less a whitespace run
     * that reaches that byte. */
    if (ends_text && c->high == 0) {
        *decided = ~(uint64_t)0;
        return starts;
    }
    const uint32_t first_unknown = c->high != 0 ? tki_lowest(c->high) : TKI_BLOCK_BYTES;
    if (first_unknown < 3) {
        *decided = 0;
        return starts;
    }
    /* starts at bits <= limit are exact (o200k: an apostrophe there may join the word before) */
    uint32_t limit = first_unknown - 2 - (uint32_t)(c->apostrophe >> (first_unknown - 2) & 1);
    if ((space >> (first_unknown - 1) & 1) != 0) {
        const uint32_t run_from = tki_lowest(tki_run_below(space, first_unknown - 1));
        limit = run_from < limit ? run_from : limit;
    }
    *decided = ((uint64_t)2 << limit) - 1;
    return starts;
}

/* ------------------------------------------------------------------ the cursor */

/*
 * The pieces of a text from the windows, for a loop that takes them in
 * order: tki_piece_cursor_next(cursor, ..., at) with `at` the end of the
 * piece it returned before (or where the loop starts: a piece start).
 * Zero-initialize it; a loop that stops and goes on elsewhere starts a new one.
 */
typedef struct tki_piece_cursor {
    uint64_t starts;       /* starts still to hand out, bit i: base + i                 */
    size_t base;
    size_t scalar_until;   /* pieces that start before this: the per-piece matcher      */
    uint32_t failures;     /* windows in a row that decided nothing                     */
    int text_end_pending;  /* after the last start handed out, the piece ends the text  */
} tki_piece_cursor;

/*
 * The starts of the window `window` (64 bytes readable, zero past `valid`),
 * as bytes, masked to those decided, and in *all_decided whether it decides
 * every piece to the end of the text.  With `wide` (a constant: an ASCII
 * window, most of English text and code, gets its own copy) the window has
 * high bytes.
 */
static TKI_ALWAYS_INLINE uint64_t tki_block_decided_starts(int32_t pattern, tki_block_classes *classes,
                                                           const uint8_t *window, uint32_t valid,
                                                           int ends_text, const int wide, int *all_decided) {
    tki_block_extra extra = {0, 0, 0, 0};
    if (classes->apostrophe != 0) {
        tki_block_contractions(window, valid, classes->apostrophe, pattern != TKI_PATTERN_R50K, &extra.two,
                               &extra.three);
    }
    /* Characters of more than one byte: the masks one bit per character (above). */
    uint32_t characters = valid;
    tki_char_plan plan;
    plan.leads = 0;
    if (wide) {
        uint64_t continuation = 0;
        tki_block_classify_wide(window, valid, pattern == TKI_PATTERN_O200K, classes, &continuation, &extra.both,
                                &extra.marks);
        if (continuation != 0) {
            tki_block_chars(classes, &extra, classes->valid & ~continuation, &plan);
            characters = classes->valid == ~(uint64_t)0 ? TKI_BLOCK_BYTES : tki_lowest(~classes->valid);
            if (!ends_text) {
                classes->high |= ~classes->valid; /* past the window: unknown, as past 64 bytes */
            }
        }
        if (pattern == TKI_PATTERN_O200K) {
            classes->high |= classes->upper & tki_prev(extra.both); /* "中A": see above */
            if (extra.marks != 0) { /* a mark right after an O character: see above */
                classes->high |= extra.marks & tki_prev(tki_block_other(classes));
            }
        }
    }
    uint64_t decided = 0;
    uint64_t starts = tki_block_starts(pattern, classes, characters, ends_text, &extra, &decided);
    *all_decided = ends_text && decided == ~(uint64_t)0;
    starts &= decided & ~(uint64_t)1;
    return wide && plan.leads != 0 ? tki_block_bytes_of_chars(&plan, starts) : starts;
}

/*
 * A new window at `at` (a piece start, at < len): its starts, and the end of
 * its first piece, or 0 when the window decides none (the caller then asks
 * the per-piece matcher).  Kept out of line: the loop calls it once per
 * window.
 */
static TKI_NOINLINE size_t tki_piece_cursor_refill(tki_piece_cursor *cursor, int32_t pattern,
                                                   const uint8_t *data, size_t len, size_t at) {
    const size_t left = len - at;
    const uint32_t valid = left < TKI_BLOCK_BYTES ? (uint32_t)left : TKI_BLOCK_BYTES;
    const int ends_text = left < TKI_BLOCK_BYTES;
    uint8_t padded[TKI_BLOCK_BYTES]; /* the end of the text, zero-padded */
    const uint8_t *window = data + at;
    if (valid < TKI_BLOCK_BYTES) {
        memset(padded, 0, sizeof(padded));
        memcpy(padded, window, valid);
        window = padded;
    }
    tki_block_classes classes;
    tki_block_classify_window(window, valid, &classes);
    const uint64_t high_bytes = classes.high;
    int all_decided = 0;
    uint64_t starts;
#define TKI_STARTS(p, wide) tki_block_decided_starts((p), &classes, window, valid, ends_text, (wide), &all_decided)
    switch (pattern) { /* one copy of the relations per pattern, its tests folded */
    case TKI_PATTERN_R50K:
        starts = high_bytes != 0 ? TKI_STARTS(TKI_PATTERN_R50K, 1) : TKI_STARTS(TKI_PATTERN_R50K, 0);
        break;
    case TKI_PATTERN_CL100K:
        starts = high_bytes != 0 ? TKI_STARTS(TKI_PATTERN_CL100K, 1) : TKI_STARTS(TKI_PATTERN_CL100K, 0);
        break;
    default:
        starts = high_bytes != 0 ? TKI_STARTS(TKI_PATTERN_O200K, 1) : TKI_STARTS(TKI_PATTERN_O200K, 0);
        break;
    }
#undef TKI_STARTS
    if (starts == 0 && !all_decided) {
        /* Not even the first piece: text the windows do not classify in view (or a piece
         * longer than the window).  The per-piece matcher takes the text up to the window's
         * last non-ASCII byte, and after windows that decided nothing in a row, twice as
         * much each time (text in another script costs a window per few kilobytes, not per
         * 64 bytes). */
        size_t span = high_bytes != 0 ? 64 - (uint32_t)__builtin_clzll(high_bytes) : 1;
        if (cursor->failures > 0) {
            const size_t doubled = (size_t)TKI_BLOCK_BYTES << (cursor->failures < 8 ? cursor->failures : 8);
            span = doubled < TKI_BLOCK_MAX_SCALAR_SPAN ? doubled : TKI_BLOCK_MAX_SCALAR_SPAN;
        }
        cursor->failures++;
        cursor->scalar_until = at + span;
        return 0;
    }
    /* A window that decides a piece or two costs more than the per-piece matcher would:
     * after it, leave the text to that matcher as after one that decided nothing.  (Fewer
     * than two starts: at most one bit set; a popcount is a library call on an x86-64
     * built without POPCNT, ~20 instructions a window.) */
    _Static_assert(TKI_BLOCK_MIN_PIECES == 2, "the test below counts up to two starts");
    const int few_pieces = (starts & (starts - 1)) == 0;
    if (few_pieces && !all_decided) {
        const size_t doubled = (size_t)TKI_BLOCK_BYTES << (cursor->failures < 8 ? cursor->failures : 8);
        cursor->scalar_until = at + (doubled < TKI_BLOCK_MAX_SCALAR_SPAN ? doubled : TKI_BLOCK_MAX_SCALAR_SPAN);
        cursor->failures++;
    } else {
        cursor->failures = 0;
    }
    cursor->base = at;
    cursor->text_end_pending = all_decided;
    if (starts == 0) { /* one piece, to the end of the text */
        cursor->text_end_pending = 0;
        cursor->starts = 0;
        return len;
    }
    cursor->starts = starts & (starts - 1);
    return at + tki_lowest(starts);
}

/* The next start the last window handed out, as a piece end (cursor->starts != 0). */
static TKI_ALWAYS_INLINE size_t tki_piece_cursor_take(tki_piece_cursor *cursor) {
    const size_t end = cursor->base + tki_lowest(cursor->starts);
    cursor->starts &= cursor->starts - 1;
    return end;
}

/*
 * The end of the piece at `at` (at < len, a piece start: the end this
 * returned before, or the loop's first position) in a text that ends at len
 * for good, for a built-in TKI_PATTERN_*.  The same as tki_pretokenize_next.
 */
static TKI_ALWAYS_INLINE size_t tki_piece_cursor_next(tki_piece_cursor *cursor, int32_t pattern,
                                                      const uint8_t *data, size_t len, size_t at) {
    if (cursor->starts != 0) {
        return tki_piece_cursor_take(cursor);
    }
    if (cursor->text_end_pending) {
        cursor->text_end_pending = 0;
        return len;
    }
    if (at >= cursor->scalar_until) {
        const size_t end = tki_piece_cursor_refill(cursor, pattern, data, len, at);
        if (end != 0) {
            return end;
        }
    }
    return tki_pretokenize_next(pattern, data, len, at);
}

/*
 * The same for a text that may continue past len (a stream's pending text):
 * the end of the piece at `at` where the windows decide it for every
 * continuation, else 0 (the caller asks the per-piece matcher, which says
 * whether the end of the text mattered).  Only windows that lie inside the
 * text (64 bytes from `at`) are opened.  Such a window decides its starts
 * from its own 64 bytes and leaves undecided every start that a byte after it
 * could move (ends_text is 0), so the starts it hands out are the same
 * whatever follows it: no byte, as tki_piece_cursor_next already relies on
 * when a text ends right after a window, or any continuation.  The pieces
 * between them are final.
 */
static TKI_ALWAYS_INLINE size_t tki_piece_cursor_next_final(tki_piece_cursor *cursor, int32_t pattern,
                                                            const uint8_t *data, size_t len, size_t at) {
    if (cursor->starts != 0) {
        return tki_piece_cursor_take(cursor);
    }
    if (len - at >= TKI_BLOCK_BYTES && at >= cursor->scalar_until) {
        return tki_piece_cursor_refill(cursor, pattern, data, len, at);
    }
    return 0;
}

#endif /* TIKTOKEN_INC_PRETOKENIZE_BLOCK_H */
