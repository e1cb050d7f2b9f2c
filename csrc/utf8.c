/*
 * utf8.c — checking that bytes are UTF-8 as CPython's decoder accepts it (no
 * overlong forms, no surrogates, nothing past U+10FFFF), fast on real text.
 *
 * Text in one script repeats characters of one length, and ASCII comes in
 * runs, so the check takes ASCII 64 (SSE2), 32 and 8 bytes at a time, and other
 * characters whole, four or eight bytes at a compare, as big-endian integers
 * whose ranges are the characters' byte ranges; a run of one character (a
 * stream fed a run of CJK or emoji in chunks, each starting with it) goes as
 * copies of its first, 32 bytes at a compare.  With AVX2 (chosen at run time),
 * 32 bytes of any mix are checked at a time first (utf8_blocks_avx2), and the
 * tests above take what is left near the end or at an error.  Two callers: a stream checks
 * each feed (stream.c, which carries a character cut between feeds and does
 * the byte-at-a-time part itself), and a flat batch checks the bytes it is
 * given (tki_utf8_valid_prefix, through the binding).
 */
#include <stdint.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(TKI_NO_SIMD)
#define TKI_UTF8_AVX2 1
#include <immintrin.h>
#endif

/*
 * The `width` (4 or 8) bytes at data as an integer, the first the most
 * significant: a character's byte ranges become ranges of it.
 */
static uint64_t load_be(const uint8_t *data, size_t width) {
    uint64_t word = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (width == 8) {
        memcpy(&word, data, 8);
        return __builtin_bswap64(word);
    }
    uint32_t half;
    memcpy(&half, data, 4);
    return __builtin_bswap32(half);
#else
    for (size_t k = 0; k < width; k++) {
        word = word << 8 | data[k];
    }
    return word;
#endif
}

/*
 * Text in one script repeats characters of one length.  Where eight bytes
 * remain, two three-byte characters (leads E1..EC, EE..EF: no second-byte
 * range to test), two four-byte ones or four two-byte ones are tested at a
 * compare; anything else goes to the character-at-a-time test.
 */
static size_t utf8_same_length_run(const uint8_t *data, size_t i, size_t len) {
    while (len - i >= 8) {
        uint64_t word = load_be(data + i, 8);
        if ((word & 0xF0C0C0F0C0C00000ull) == 0xE08080E080800000ull) {
            uint32_t first = (uint32_t)(word >> 56), second = (uint32_t)(word >> 32) & 0xFF;
            if (first == 0xE0 || first == 0xED || second == 0xE0 || second == 0xED) {
                break;
            }
            i += 6;
        } else if ((word & 0xF8C0C0C0F8C0C0C0ull) == 0xF0808080F0808080ull) {
            uint32_t high = (uint32_t)(word >> 32), low = (uint32_t)word;
            if (high < 0xF0900000u || high >= 0xF4900000u || low < 0xF0900000u || low >= 0xF4900000u) {
                break; /* F0 90..BF, F1..F3, F4 80..8F */
            }
            i += 8;
        } else if ((word & 0xE0C0E0C0E0C0E0C0ull) == 0xC080C080C080C080ull) {
            /* a lead C2..DF has one of its bits 1..4 set: 0x7E00 added to its lane reaches bit 15 */
            uint64_t leads = (word & 0x1E001E001E001E00ull) + 0x7E007E007E007E00ull;
            if ((leads & 0x8000800080008000ull) != 0x8000800080008000ull) {
                break;
            }
            i += 8;
        } else {
            break;
        }
    }
    return i;
}

/*
 * The end of the whole, valid characters from data[i] on, tested a character
 * at a time (its bytes together) while four bytes remain, so that nothing is
 * read past len.  It stops at anything else -- a bad byte, a character the
 * end may cut -- which the byte-at-a-time check then reports or carries, and
 * after four ASCII bytes in a row, which the caller's loops take eight and
 * thirty-two at a time (English with a character of another script here and
 * there is ASCII after it).
 */
static size_t utf8_whole_characters(const uint8_t *data, size_t i, size_t len) {
    while (len - i >= 4) {
        uint32_t word = (uint32_t)load_be(data + i, 4);
        if (word < 0x80000000u) {
            if ((word & 0x80808080u) == 0) {
                return i + 4;
            }
            i++;
        } else if ((word & 0xF0C0C000u) == 0xE0808000u && word >= 0xE0A00000u &&
                   (word < 0xEDA00000u || word >= 0xEE000000u)) {
            i += 3; /* E0 A0..BF, E1..EC, ED 80..9F, EE..EF; two continuation bytes */
        } else if ((word & 0xE0C00000u) == 0xC0800000u && word >= 0xC2000000u) {
            i += 2; /* C2..DF, a continuation byte */
        } else if ((word & 0xF8C0C0C0u) == 0xF0808080u && word >= 0xF0900000u && word < 0xF4900000u) {
            i += 4; /* F0 90..BF, F1..F3, F4 80..8F; three continuation bytes */
        } else {
            break;
        }
        if (word >= 0x80000000u) {
            i = utf8_same_length_run(data, i, len); /* more like it, likely */
        }
    }
    return i;
}

static size_t utf8_character_length(const uint8_t *data, size_t len);

#ifdef TKI_UTF8_AVX2
/*
 * Text that mixes scripts and ASCII (a character of one length, then
 * another) leaves the tests above after a few characters each time: ~7
 * instructions a byte on multilingual text, which a stream pays for every
 * feed of bytes.  With AVX2, 32 bytes are checked at once by the lookup
 * method of Keiser and Lemire ("Validating UTF-8 in less than one
 * instruction per byte", 2021): each byte with the one before it is looked
 * up by three nibbles in three 16-entry tables whose entries are bit sets of
 * the errors that pair may be (a lead not followed by a continuation, a
 * continuation after ASCII, overlong forms, surrogates, past U+10FFFF), the
 * three sets are ANDed, and a third or fourth byte is required where the
 * byte two or three back was a three- or four-byte lead.  Exactly the
 * sequences CPython's decoder accepts pass.
 */
enum {
    UTF8_TOO_SHORT = 1 << 0,      /* a lead, then no continuation           */
    UTF8_TOO_LONG = 1 << 1,       /* ASCII, then a continuation              */
    UTF8_OVERLONG_3 = 1 << 2,     /* E0 80..9F                               */
    UTF8_TOO_LARGE = 1 << 3,      /* F4 90..BF, F5..FF                       */
    UTF8_SURROGATE = 1 << 4,      /* ED A0..BF                               */
    UTF8_OVERLONG_2 = 1 << 5,     /* C0, C1                                  */
    UTF8_TOO_LARGE_1000 = 1 << 6, /* F5..FF 80..8F                           */
    UTF8_OVERLONG_4 = 1 << 6,     /* F0 80..8F                               */
    UTF8_TWO_CONTS = 1 << 7,      /* a continuation, then another            */
    UTF8_CARRY = UTF8_TOO_SHORT | UTF8_TOO_LONG | UTF8_TWO_CONTS
};

/* The 32 bytes of `input` moved on by `n` (1..3): the last n bytes of `previous` first. */
#define UTF8_BEFORE(input, previous, n) \
    _mm256_alignr_epi8((input), _mm256_permute2x128_si256((previous), (input), 0x21), 16 - (n))

/* The high and low nibbles of each byte. */
#define UTF8_HIGH(x) _mm256_and_si256(_mm256_srli_epi16((x), 4), _mm256_set1_epi8(0x0F))
#define UTF8_LOW(x) _mm256_and_si256((x), _mm256_set1_epi8(0x0F))

/*
 * The end of the characters from data[i] (a character's start) on that are
 * whole and valid, checked 32 bytes at a time: it stops before the block
 * where something is wrong, or where fewer than 32 bytes are left, and then
 * before a character cut there (the caller's tests go on from its lead).
 */
#if defined(__clang__) /* the tables' bytes of 0x80 and up go to _mm256_setr_epi8's chars as they are */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wconstant-conversion"
#endif
__attribute__((target("avx2"))) static size_t utf8_blocks_avx2(const uint8_t *data, size_t i, size_t len) {
    const __m256i first_high = _mm256_setr_epi8(
        /* 0_______: ASCII, then ... */
        UTF8_TOO_LONG, UTF8_TOO_LONG, UTF8_TOO_LONG, UTF8_TOO_LONG, UTF8_TOO_LONG, UTF8_TOO_LONG,
        UTF8_TOO_LONG, UTF8_TOO_LONG,
        /* 10______: a continuation */
        UTF8_TWO_CONTS, UTF8_TWO_CONTS, UTF8_TWO_CONTS, UTF8_TWO_CONTS,
        /* 1100____, 1101____, 1110____, 1111____: leads */
        UTF8_TOO_SHORT | UTF8_OVERLONG_2, UTF8_TOO_SHORT, UTF8_TOO_SHORT | UTF8_OVERLONG_3 | UTF8_SURROGATE,
        UTF8_TOO_SHORT | UTF8_TOO_LARGE | UTF8_TOO_LARGE_1000 | UTF8_OVERLONG_4,
        /* (the other 128-bit lane: the same) */
        UTF8_TOO_LONG, UTF8_TOO_LONG, UTF8_TOO_LONG, UTF8_TOO_LONG, UTF8_TOO_LONG, UTF8_TOO_LONG,
        UTF8_TOO_LONG, UTF8_TOO_LONG, UTF8_TWO_CONTS, UTF8_TWO_CONTS, UTF8_TWO_CONTS, UTF8_TWO_CONTS,
        UTF8_TOO_SHORT | UTF8_OVERLONG_2, UTF8_TOO_SHORT, UTF8_TOO_SHORT | UTF8_OVERLONG_3 | UTF8_SURROGATE,
        UTF8_TOO_SHORT | UTF8_TOO_LARGE | UTF8_TOO_LARGE_1000 | UTF8_OVERLONG_4);
#define UTF8_FIRST_LOW                                                                                    \
    UTF8_CARRY | UTF8_OVERLONG_3 | UTF8_OVERLONG_2 | UTF8_OVERLONG_4, UTF8_CARRY | UTF8_OVERLONG_2,       \
        UTF8_CARRY, UTF8_CARRY, UTF8_CARRY | UTF8_TOO_LARGE, UTF8_CARRY | UTF8_TOO_LARGE | UTF8_TOO_LARGE_1000, \
        UTF8_CARRY | UTF8_TOO_LARGE | UTF8_TOO_LARGE_1000, UTF8_CARRY | UTF8_TOO_LARGE | UTF8_TOO_LARGE_1000, \
        UTF8_CARRY | UTF8_TOO_LARGE | UTF8_TOO_LARGE_1000, UTF8_CARRY | UTF8_TOO_LARGE | UTF8_TOO_LARGE_1000, \
        UTF8_CARRY | UTF8_TOO_LARGE | UTF8_TOO_LARGE_1000, UTF8_CARRY | UTF8_TOO_LARGE | UTF8_TOO_LARGE_1000, \
        UTF8_CARRY | UTF8_TOO_LARGE | UTF8_TOO_LARGE_1000,                                                 \
        UTF8_CARRY | UTF8_TOO_LARGE | UTF8_TOO_LARGE_1000 | UTF8_SURROGATE,                                \
        UTF8_CARRY | UTF8_TOO_LARGE | UTF8_TOO_LARGE_1000, UTF8_CARRY | UTF8_TOO_LARGE | UTF8_TOO_LARGE_1000
    const __m256i first_low = _mm256_setr_epi8(UTF8_FIRST_LOW, UTF8_FIRST_LOW);
#undef UTF8_FIRST_LOW
#define UTF8_SECOND_HIGH                                                                                   \
    UTF8_TOO_SHORT, UTF8_TOO_SHORT, UTF8_TOO_SHORT, UTF8_TOO_SHORT, UTF8_TOO_SHORT, UTF8_TOO_SHORT,       \
        UTF8_TOO_SHORT, UTF8_TOO_SHORT,                                                                    \
        UTF8_TOO_LONG | UTF8_OVERLONG_2 | UTF8_TWO_CONTS | UTF8_OVERLONG_3 | UTF8_TOO_LARGE_1000 |          \
            UTF8_OVERLONG_4,                                                                               \
        UTF8_TOO_LONG | UTF8_OVERLONG_2 | UTF8_TWO_CONTS | UTF8_OVERLONG_3 | UTF8_TOO_LARGE,                \
        UTF8_TOO_LONG | UTF8_OVERLONG_2 | UTF8_TWO_CONTS | UTF8_SURROGATE | UTF8_TOO_LARGE,                 \
        UTF8_TOO_LONG | UTF8_OVERLONG_2 | UTF8_TWO_CONTS | UTF8_SURROGATE | UTF8_TOO_LARGE,                 \
        UTF8_TOO_SHORT, UTF8_TOO_SHORT, UTF8_TOO_SHORT, UTF8_TOO_SHORT
    const __m256i second_high = _mm256_setr_epi8(UTF8_SECOND_HIGH, UTF8_SECOND_HIGH);
#undef UTF8_SECOND_HIGH
    /* a lead in the last three bytes whose character goes on past them */
    const __m256i last_leads = _mm256_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                                -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, (char)(0xF0 - 1),
                                                (char)(0xE0 - 1), (char)(0xC0 - 1));
    const size_t start = i;
    __m256i previous = _mm256_setzero_si256();
    while (len - i >= 32) {
        const __m256i input = _mm256_loadu_si256((const __m256i *)(const void *)(data + i));
        if (_mm256_movemask_epi8(input) == 0) { /* ASCII: wrong only after a cut character */
            const __m256i cut = _mm256_subs_epu8(previous, last_leads);
            if (!_mm256_testz_si256(cut, cut)) {
                break;
            }
            i += 32;
            while (len - i >= 128) { /* more ASCII, 128 bytes at a test, then 64 */
                const __m256i *at = (const __m256i *)(const void *)(data + i);
                const __m256i any = _mm256_or_si256(_mm256_or_si256(_mm256_loadu_si256(at), _mm256_loadu_si256(at + 1)),
                                                    _mm256_or_si256(_mm256_loadu_si256(at + 2), _mm256_loadu_si256(at + 3)));
                if (_mm256_movemask_epi8(any) != 0) {
                    break;
                }
                i += 128;
            }
            while (len - i >= 64) {
                const __m256i *at = (const __m256i *)(const void *)(data + i);
                if (_mm256_movemask_epi8(_mm256_or_si256(_mm256_loadu_si256(at), _mm256_loadu_si256(at + 1))) != 0) {
                    break;
                }
                i += 64;
            }
            previous = _mm256_setzero_si256(); /* (ASCII before a block is as good as zeros) */
            continue;
        }
        __m256i error;
        {
            const __m256i before1 = UTF8_BEFORE(input, previous, 1);
            const __m256i special = _mm256_and_si256(
                _mm256_and_si256(_mm256_shuffle_epi8(first_high, UTF8_HIGH(before1)),
                                 _mm256_shuffle_epi8(first_low, UTF8_LOW(before1))),
                _mm256_shuffle_epi8(second_high, UTF8_HIGH(input)));
            /* a third (fourth) byte where two (three) back is a lead of three (four) bytes or more */
            const __m256i third = _mm256_subs_epu8(UTF8_BEFORE(input, previous, 2), _mm256_set1_epi8(0xE0 - 0x80));
            const __m256i fourth = _mm256_subs_epu8(UTF8_BEFORE(input, previous, 3), _mm256_set1_epi8(0xF0 - 0x80));
            const __m256i required = _mm256_and_si256(_mm256_or_si256(third, fourth), _mm256_set1_epi8((char)0x80));
            error = _mm256_xor_si256(required, special);
        }
        if (!_mm256_testz_si256(error, error)) {
            break;
        }
        previous = input;
        i += 32;
    }
    /* back to the lead of a character the stop cuts (the blocks checked the bytes before it) */
    for (size_t back = 1; back <= 3 && i - start >= back; back++) {
        uint8_t byte = data[i - back];
        if ((byte & 0xC0) == 0x80) {
            continue;
        }
        size_t needed = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1;
        return needed > back ? i - back : i;
    }
    return i;
}
#if defined(__clang__)
#pragma clang diagnostic pop
#endif
#undef UTF8_BEFORE
#undef UTF8_HIGH
#undef UTF8_LOW
#endif

size_t tki_utf8_whole_prefix(const uint8_t *data, size_t len) {
    size_t i = 0;
    if (len >= 64 && data[0] >= 0xC2) { /* a run of this character?  (once a call: text of */
        size_t first = utf8_character_length(data, len); /* many scripts pays nothing per character) */
        if (first > 0) {
            i = tki_copies_end(data, first, len, first);
        }
    }
#ifdef TKI_UTF8_AVX2
    if (len - i >= 64 && __builtin_cpu_supports("avx2")) {
        i = utf8_blocks_avx2(data, i, len);
    }
#endif
    for (;;) {
#ifdef TKI_SSE2
        while (len - i >= 64) { /* (the sign bits of 64 bytes at a test) */
            const __m128i *at = (const __m128i *)(data + i);
            __m128i any = _mm_or_si128(_mm_or_si128(_mm_loadu_si128(at), _mm_loadu_si128(at + 1)),
                                       _mm_or_si128(_mm_loadu_si128(at + 2), _mm_loadu_si128(at + 3)));
            if (_mm_movemask_epi8(any) != 0) {
                break;
            }
            i += 64;
        }
#endif
        while (len - i >= 32) {
            uint64_t words[4];
            memcpy(words, data + i, 32);
            if ((words[0] | words[1] | words[2] | words[3]) & 0x8080808080808080ull) {
                break;
            }
            i += 32;
        }
        while (len - i >= 8) {
            uint64_t word;
            memcpy(&word, data + i, 8);
            if (word & 0x8080808080808080ull) {
                break;
            }
            i += 8;
        }
        size_t whole_end = utf8_whole_characters(data, i, len);
        if (whole_end == i) {
            return i;
        }
        i = whole_end;
    }
}

/*
 * The length of the character at data[0] if it is valid and whole within len
 * bytes (len >= 1), else 0: the byte-at-a-time form of the tests above.
 */
static size_t utf8_character_length(const uint8_t *data, size_t len) {
    const uint8_t lead = data[0];
    if (lead < 0x80) {
        return 1;
    }
    size_t size = 0;
    uint8_t low = 0x80, high = 0xBF; /* the second byte's range */
    if (lead >= 0xC2 && lead <= 0xDF) {
        size = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        size = 3;
        low = lead == 0xE0 ? 0xA0 : 0x80;
        high = lead == 0xED ? 0x9F : 0xBF;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        size = 4;
        low = lead == 0xF0 ? 0x90 : 0x80;
        high = lead == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (len < size || data[1] < low || data[1] > high) {
        return 0;
    }
    for (size_t k = 2; k < size; k++) {
        if ((data[k] & 0xC0) != 0x80) {
            return 0;
        }
    }
    return size;
}

size_t tki_utf8_valid_prefix(const uint8_t *data, size_t len) {
    size_t i = 0;
    while (i < len) {
        i += tki_utf8_whole_prefix(data + i, len - i);
        if (i == len) {
            break;
        }
        const size_t size = utf8_character_length(data + i, len - i);
        if (size == 0) {
            break;
        }
        i += size;
    }
    return i;
}
