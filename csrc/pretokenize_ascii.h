/*
 * pretokenize_ascii.h — the pre-tokenizer's shortcut for the common pieces of
 * ASCII text, inline, so that the encoder's batch loop splits most of real
 * text without a call.
 *
 * tki_pretokenize_ascii decides, at a position, the pieces that make up most
 * of English and code: a word with its prefix ("word", " word", "(word",
 * o200k's "don't"), a contraction (r50k, cl100k: "'s"), a number (up to
 * three digits with cl100k and o200k), a run of punctuation with its newlines
 * (" (", ".\n"), or whitespace without newlines before a non-space.  It
 * answers only when every byte that decides the match is ASCII and lies
 * before the end of the text, so a piece it returns is the one the full
 * matcher returns and cannot change when more text follows (a stream may use
 * it); with `final` (the text ends there for good: one-shot encoding) also
 * when a word, number, run of punctuation or of spaces ends with the text.
 * Otherwise (newlines in whitespace, a non-ASCII byte in view, the end of the
 * text, a piece longer than TKI_ASCII_SHORTCUT_BYTES) it returns 0 and the
 * full matcher (pretokenize.c) decides.  The bound keeps the shortcut O(1): a stream
 * matches its open piece again after every feed, and the full matcher's scans
 * resume where they stopped, where the shortcut would rescan a long run.
 * tki_pretokenize_next (below) is the two together, for the encoder and for
 * tki_pretokenize, so every test and fuzz run of the pre-tokenizer against the
 * `regex` package checks the shortcut; the stream's matcher
 * (tki_pretokenize_match_ex) tries it first too.
 */
#ifndef TIKTOKEN_INC_PRETOKENIZE_ASCII_H
#define TIKTOKEN_INC_PRETOKENIZE_ASCII_H

#include <string.h>

#include "internal.h"
#include "pretokenize_tables.h"

/* The class bits of an ASCII byte: the first block of the generated tables,
 * which is always their block 0 (gen_unicode_tables.py numbers the blocks in
 * the order they first occur; tests/c/test_core.c checks it). */
static inline uint8_t tki_ascii_class(uint8_t byte) {
    return tki_unicode_stage2[0][byte & 0x7Fu];
}

/* A word of eight copies of a byte. */
#define TKI_EIGHT_BYTES(byte) (0x0101010101010101ull * (uint64_t)(byte))

/*
 * From pos, the end of the run of bytes b with lo <= (b | fold) <= hi, for a
 * range within ASCII (1 <= lo <= hi <= 0x7F; a byte >= 0x80 ends the run):
 * eight bytes at a time where eight can be read, so that a word costs one
 * hard-to-predict branch (where it ends), not one per letter.  In each word the
 * top bit of a byte is set where lo - 1 < byte < hi + 1, without carries
 * between bytes (the low seven bits are added apart from the top one).
 */
static inline size_t tki_ascii_run_end(const uint8_t *data, size_t pos, size_t len, uint8_t lo,
                                       uint8_t hi, uint8_t fold) {
#if (defined(__GNUC__) || defined(__clang__)) && defined(__BYTE_ORDER__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (len - pos >= 8) {
        uint64_t word;
        memcpy(&word, data + pos, 8);
        uint64_t folded = word | TKI_EIGHT_BYTES(fold);
        uint64_t low7 = folded & TKI_EIGHT_BYTES(0x7F);
        uint64_t inside = (TKI_EIGHT_BYTES(127 + hi + 1) - low7) & ~folded &
                          (low7 + TKI_EIGHT_BYTES(127 - (lo - 1))) & TKI_EIGHT_BYTES(0x80);
        uint64_t outside = ~inside & TKI_EIGHT_BYTES(0x80);
        if (outside != 0) {
            return pos + (size_t)__builtin_ctzll(outside) / 8;
        }
        pos += 8;
    }
#endif
    while (pos < len && (uint8_t)((data[pos] | fold) - lo) <= (uint8_t)(hi - lo)) {
        pos++;
    }
    return pos;
}

/*
 * From pos, the end of the whole sixteen-byte blocks of ASCII whitespace
 * (\t \n \v \f \r and ' '), with SSE2; pos itself elsewhere (the caller's
 * byte loop takes the run).  *after_last_newline becomes the end of the last
 * CR or LF among them (unchanged if none).  A run of spaces or newlines (hostile
 * text, indentation) costs a few instructions per sixteen bytes, not a few
 * per byte.
 */
static inline size_t tki_ascii_space_run(const uint8_t *data, size_t pos, size_t len,
                                         size_t *after_last_newline) {
#if defined(TKI_SSE2)
    while (len - pos >= 16) {
        const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(data + pos));
        const __m128i shifted = _mm_sub_epi8(x, _mm_set1_epi8('\t'));
        const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(shifted, _mm_set1_epi8(4)), shifted);
        const __m128i space = _mm_or_si128(control, _mm_cmpeq_epi8(x, _mm_set1_epi8(' ')));
        if (_mm_movemask_epi8(space) != 0xFFFF) {
            break;
        }
        const uint32_t newlines = (uint32_t)_mm_movemask_epi8(
            _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\n')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\r'))));
        if (newlines != 0) {
            *after_last_newline = pos + 32 - (size_t)__builtin_clz(newlines);
        }
        pos += 16;
    }
#else
    /* eight spaces or eight LFs at a compare (a word of one byte repeated: any byte order) */
    while (len - pos >= 8) {
        uint64_t word;
        memcpy(&word, data + pos, 8);
        if (word == TKI_EIGHT_BYTES('\n')) {
            *after_last_newline = pos + 8;
        } else if (word != TKI_EIGHT_BYTES(' ')) {
            break;
        }
        pos += 8;
    }
#endif
    return pos;
}

enum { TKI_ASCII_SHORTCUT_BYTES = 64 }; /* the most the shortcut reads from pos */

#define TKI_ASCII_WORD_CLASSES (TKI_CLASS_LETTER | TKI_CLASS_NUMBER | TKI_CLASS_SPACE)

/* An ASCII byte of no letter/number/space class (punctuation, most controls). */
static inline int tki_ascii_other(uint8_t byte) {
    return byte < 0x80 && (tki_ascii_class(byte) & TKI_ASCII_WORD_CLASSES) == 0;
}

/*
 * A contraction at pos, an apostrophe: '(?:[sdmt]|ll|ve|re), ASCII case
 * folded when ignore_case (the pattern's (?i:...)).  Its end; pos when none
 * starts there; SIZE_MAX when that is not decided in ASCII before the end of
 * the text (under (?i), U+017F folds to 's').
 */
static inline size_t tki_ascii_contraction(const uint8_t *data, size_t len, size_t pos,
                                           int ignore_case) {
    if (len - pos < 3 || data[pos + 1] >= 0x80 || data[pos + 2] >= 0x80) {
        return SIZE_MAX;
    }
    uint8_t fold = ignore_case ? 0x20 : 0;
    uint8_t first = data[pos + 1], second = data[pos + 2];
    if (first >= 'A' && first <= 'Z') {
        first |= fold;
    }
    if (second >= 'A' && second <= 'Z') {
        second |= fold;
    }
    if (first == 's' || first == 't' || first == 'd' || first == 'm') {
        return pos + 2;
    }
    if ((first == 'l' && second == 'l') || ((first == 'v' || first == 'r') && second == 'e')) {
        return pos + 3;
    }
    return pos;
}

/*
 * The end of the piece at pos (pos < len) for a TKI_PATTERN_*, or 0 when the
 * full matcher must decide (above).  The cases, in the patterns' own order:
 *   r50k:   '(?:..) | ?\p{L}++ | ?\p{N}++ | ?[^\s\p{L}\p{N}]++ | then \s
 *   cl100k: \p{N}{3} | '(?i:..) | [^\r\n\p{L}\p{N}]?+\p{L}++ | \p{N}{1,3}
 *           | ?[^\s\p{L}\p{N}]++[\r\n]*+ | then \s
 *   o200k:  \p{N}{3} | [^\r\n\p{L}\p{N}]?U*W+C? or U+W*C? (in ASCII: capitals,
 *           then small letters, then C?) | \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n/]*
 *           | then \s
 * "then \s": whitespace without \r or \n followed by an ASCII non-space,
 * once the alternatives before have failed: one character is a piece of its
 * own (\s*[\r\n], \s+(?!\S), \s all take just it; \s++$ and a run need
 * more whitespace); a run of k >= 2 gives k - 1 (\s+(?!\S) gives back the
 * last, which the next piece's prefix takes); a run that ends the text, all
 * of it (\s++$, or \s+(?!\S) at the end).
 */
static TKI_ALWAYS_INLINE size_t tki_pretokenize_ascii(int32_t pattern, const uint8_t *data,
                                                      size_t len, size_t pos, int final) {
    if (len - pos < 2 || data[pos] >= 0x80 || data[pos + 1] >= 0x80) {
        return 0;
    }
    uint8_t first = data[pos], next = data[pos + 1];
    size_t view = len - pos > TKI_ASCII_SHORTCUT_BYTES ? pos + TKI_ASCII_SHORTCUT_BYTES : len;
    uint8_t first_class = tki_ascii_class(first), next_class = tki_ascii_class(next);
    int r50k = pattern == TKI_PATTERN_R50K, o200k = pattern == TKI_PATTERN_O200K;
    if (!r50k && (uint8_t)(first - '0') < 10 && tki_three_ascii_digits(data, len, pos)) {
        return pos + 3;
    }
    if (first == '\'' && !o200k) {
        size_t end = tki_ascii_contraction(data, len, pos, !r50k);
        if (end != pos) {
            return end == SIZE_MAX ? 0 : end; /* a contraction, or undecided */
        }
    }
    /* Where a word (r50k: or a number) starts: at pos, or after a one-character prefix. */
    size_t start = SIZE_MAX;
    uint8_t start_class = 0;
    if (first_class & (r50k ? TKI_CLASS_LETTER | TKI_CLASS_NUMBER : TKI_CLASS_LETTER)) {
        start = pos;
        start_class = first_class;
    } else if (r50k ? first == ' ' && (next_class & (TKI_CLASS_LETTER | TKI_CLASS_NUMBER))
                    : first != '\r' && first != '\n' && !(first_class & TKI_CLASS_NUMBER) &&
                          (next_class & TKI_CLASS_LETTER)) {
        start = pos + 1;
        start_class = next_class;
    }
    size_t end;
    if (start != SIZE_MAX) {
        if (start_class & TKI_CLASS_NUMBER) { /* r50k: ?\p{N}++ */
            end = tki_ascii_run_end(data, start, view, '0', '9', 0);
        } else if (o200k) { /* capitals (mostly none or one: no word-wide scan), then small letters */
            end = start;
            while (end < view && (uint8_t)(data[end] - 'A') <= 'Z' - 'A') {
                end++;
            }
            end = tki_ascii_run_end(data, end, view, 'a', 'z', 0);
        } else {
            end = tki_ascii_run_end(data, start, view, 'a', 'z', 0x20);
        }
        if (final && end == len) {
            return end; /* the word ends with the text */
        }
        if (end >= view || data[end] >= 0x80) {
            return 0; /* the run may go on */
        }
        if (o200k && data[end] == '\'') { /* C? */
            end = tki_ascii_contraction(data, len, end, 1);
            return end == SIZE_MAX ? 0 : end;
        }
        return end;
    }
    if (first_class & TKI_CLASS_NUMBER) { /* cl100k, o200k: \p{N}{1,2} before a non-digit */
        end = (next_class & TKI_CLASS_NUMBER) ? pos + 2 : pos + 1;
        return (end < len && data[end] < 0x80) || (final && end == len) ? end : 0;
    }
    size_t body = SIZE_MAX; /* where " ?[^\s\p{L}\p{N}]+" has its run */
    if (!(first_class & TKI_ASCII_WORD_CLASSES)) {
        body = pos;
    } else if (first == ' ' && !(next_class & TKI_ASCII_WORD_CLASSES)) {
        body = pos + 1;
    }
    if (body != SIZE_MAX) {
        end = body + 1;
        while (end < view && tki_ascii_other(data[end])) {
            end++;
        }
        if (final && end == len) {
            return end;
        }
        if (end >= view || data[end] >= 0x80) {
            return 0;
        }
        if (!r50k) { /* [\r\n]*, o200k: [\r\n/]* */
            while (end < view &&
                   (data[end] == '\r' || data[end] == '\n' || (o200k && data[end] == '/'))) {
                end++;
            }
            if (end >= view && !(final && end == len)) {
                return 0;
            }
        }
        return end;
    }
    /* Whitespace without newlines, before an ASCII non-space or the end. */
    if (!(first_class & TKI_CLASS_SPACE)) {
        return 0;
    }
    if (first == '\r' || first == '\n') { /* alone before a non-space */
        return !(next_class & TKI_CLASS_SPACE) ? pos + 1 : 0;
    }
    end = pos + 1;
    while (end < view && data[end] < 0x80 && data[end] != '\r' && data[end] != '\n' &&
           (tki_ascii_class(data[end]) & TKI_CLASS_SPACE)) {
        end++;
    }
    if (final && end == len) {
        return end;
    }
    if (end >= view || data[end] >= 0x80 || (tki_ascii_class(data[end]) & TKI_CLASS_SPACE)) {
        return 0; /* a newline, a longer run, or a character that may be a space */
    }
    return end - pos >= 2 ? end - 1 : end;
}

/* The end of the piece at pos (pos < len, pattern a TKI_PATTERN_*) in a text
 * that ends at len for good: the shortcut's answer, else the full matcher's. */
static TKI_ALWAYS_INLINE size_t tki_pretokenize_next(int32_t pattern, const uint8_t *data,
                                                     size_t len, size_t pos) {
    size_t end = tki_pretokenize_ascii(pattern, data, len, pos, 1);
    return end != 0 ? end : tki_pretokenize_match(pattern, data, len, pos);
}

#endif /* TIKTOKEN_INC_PRETOKENIZE_ASCII_H */
