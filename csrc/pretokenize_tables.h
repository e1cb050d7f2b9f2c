/*
 * pretokenize_tables.h — the generated Unicode class tables (unicode_tables.c)
 * as the pre-tokenizer reads them, and the UTF-8 decoding that finds the
 * code points to look up (the per-piece matcher's and the windows' alike).
 */
#ifndef TIKTOKEN_INC_PRETOKENIZE_TABLES_H
#define TIKTOKEN_INC_PRETOKENIZE_TABLES_H

#include <stddef.h>
#include <stdint.h>

#define TKI_CLASS_LETTER 1u      /* \p{L}                              */
#define TKI_CLASS_NUMBER 2u      /* \p{N}                              */
#define TKI_CLASS_SPACE 4u       /* \s                                 */
#define TKI_CLASS_UPPER_LIKE 8u  /* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]    */
#define TKI_CLASS_LOWER_LIKE 16u /* [\p{Ll}\p{Lm}\p{Lo}\p{M}]          */

#define TKI_UNICODE_BLOCK_BITS 7

extern const uint16_t tki_unicode_stage1[0x110000 >> TKI_UNICODE_BLOCK_BITS];
extern const uint8_t tki_unicode_stage2[][1u << TKI_UNICODE_BLOCK_BITS];

/*
 * Two-byte characters sixteen code points at a time, for the windows
 * (pretokenize_block.h): [o200k][k][n] is the group of first byte
 * 0xC0 + 16 * (k >> 2) + n and second byte 0x80 + 16 * (k & 3) .. + 15, and
 * says what all sixteen are when they are alike: 1 a letter (with o200k's
 * pattern a small one, W only), 2 a capital (U only), 3 a letter of both U
 * and W; 0 when they differ, are no letters, hold U+017F or are overlong.
 */
#define TKI_GROUP_LETTER 1u
#define TKI_GROUP_CAPITAL 2u
#define TKI_GROUP_BOTH 3u
extern const uint8_t tki_two_byte_groups[2][8][16];

static inline uint8_t tki_unicode_class(uint32_t code_point) {
    if (code_point >= 0x110000u) {
        return 0;
    }
    return tki_unicode_stage2[tki_unicode_stage1[code_point >> TKI_UNICODE_BLOCK_BITS]]
                             [code_point & ((1u << TKI_UNICODE_BLOCK_BITS) - 1u)];
}

/*
 * The code point of three bytes at s already known to be a first byte
 * 0xE0..0xEF and two continuation bytes (the windows know it from their
 * masks); 0 when they are no valid sequence (an overlong form, a surrogate).
 */
static inline uint32_t tki_three_byte_code_point(const uint8_t *s) {
    uint32_t cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    return cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF) ? cp : 0;
}

/*
 * A valid two- or three-byte UTF-8 sequence at s (of `left` readable bytes):
 * its width, with its code point in *code_point; else 0 (another width, an
 * invalid or cut sequence, an overlong form, a surrogate).
 */
static inline size_t tki_decode_two_or_three(const uint8_t *s, size_t left, uint32_t *code_point) {
    if (s[0] >= 0xC2 && s[0] < 0xE0 && left >= 2 && (s[1] & 0xC0) == 0x80) {
        *code_point = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (s[0] >= 0xE0 && s[0] < 0xF0 && left >= 3 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80) {
        uint32_t cp = tki_three_byte_code_point(s);
        if (cp != 0) {
            *code_point = cp;
            return 3;
        }
    }
    return 0;
}

/* The same for a valid four-byte sequence (U+10000..U+10FFFF): 4, else 0. */
static inline size_t tki_decode_four(const uint8_t *s, size_t left, uint32_t *code_point) {
    if (s[0] >= 0xF0 && s[0] < 0xF5 && left >= 4 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80 &&
        (s[3] & 0xC0) == 0x80) {
        uint32_t cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                      ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        if (cp >= 0x10000 && cp <= 0x10FFFF) {
            *code_point = cp;
            return 4;
        }
    }
    return 0;
}

/*
 * The CJK ideographs U+4000..U+4DBF and U+4E00..U+9FFF (three bytes, lead
 * 0xE4..0xE9, all but the hexagram symbols U+4DC0..U+4DFF: lead 0xE4, second
 * byte 0xB7) are all letters of class Lo in the generated tables (test_core
 * checks every three-byte sequence), so a run of them (most of Chinese and much of Japanese
 * text) is recognised from its bytes: three compares a character instead of
 * a decode, a two-stage lookup and a compare with the character before.
 * s has three readable bytes; the range holds no surrogate and no overlong
 * form, so the two continuation bytes make a valid sequence.
 */
#define TKI_IDEOGRAPH_CLASS (TKI_CLASS_LETTER | TKI_CLASS_UPPER_LIKE | TKI_CLASS_LOWER_LIKE)

static inline int tki_is_ideograph(const uint8_t *s) {
    return (uint8_t)(s[0] - 0xE4u) < 6u && (s[1] & 0xC0u) == 0x80u && (s[2] & 0xC0u) == 0x80u &&
           (s[0] != 0xE4u || s[1] != 0xB7u);
}

#endif /* TIKTOKEN_INC_PRETOKENIZE_TABLES_H */
