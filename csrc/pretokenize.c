/*
 * pretokenize.c — tiktoken's regex pre-split, for the built-in patterns, in C.
 *
 * Each function below returns the end of the match that the `regex` package
 * would find at a position for one pattern, alternatives tried in order with
 * its backtracking worked out by hand, so that the split equals
 * `regex.findall(pattern, text)` on every input.  No backtracking, no
 * recursion: each match scans its run once or twice, O(n) for a text.
 *
 *   r50k/p50k/gpt2:  's|'t|...| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
 *   cl100k:          '(?i:..)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+
 *                    | ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s
 *   o200k:           [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,3}
 *                    | ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *                    (U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W = [\p{Ll}\p{Lm}\p{Lo}\p{M}],
 *                     C = (?i:'s|'t|'re|'ve|'m|'ll|'d))
 *
 * `$` (without MULTILINE) also matches before a final "\n", but a \s++ run
 * already holds that "\n", so "\s++$" is "a whitespace run that reaches the
 * end".  The end is the end of the text given: tiktoken splits the text
 * between special tokens separately, and so does the caller.
 *
 * Input is UTF-8.  A byte that does not start a valid sequence is taken as
 * one character of no class (like punctuation), so invalid input still
 * splits, deterministically, and nothing is read out of bounds.
 */
#include <string.h>

#include "internal.h"
#include "pretokenize_ascii.h"
#include "pretokenize_block.h"
#include "pretokenize_tables.h"

typedef struct text_view {
    const uint8_t *data;
    size_t len;
    int touched_end;        /* the match looked at the end of the text           */
    tki_scan_memo *memo;    /* resumable scans (streaming), or NULL              */
    int memo_writable;      /* probes read the memo but must not record in it    */
} text_view;

/*
 * A scan that ran into the end of the text, kept so that the next attempt on
 * a longer text resumes where it stopped: a stream re-matches its unfinished
 * piece after every feed, and must not rescan a long run each time.
 */
static tki_scan_entry *memo_find(text_view *text, uint32_t kind, size_t start) {
    if (text->memo == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < text->memo->count; i++) {
        tki_scan_entry *entry = &text->memo->entries[i];
        if (entry->kind == kind && entry->start == start && entry->end <= text->len) {
            return entry;
        }
    }
    return NULL;
}

static void memo_store(text_view *text, uint32_t kind, size_t start, size_t end,
                       const size_t aux[3]) {
    if (text->memo == NULL || !text->memo_writable) {
        return;
    }
    if (end <= start) {
        return; /* nothing scanned: nothing to resume */
    }
    tki_scan_entry *entry = memo_find(text, kind, start);
    if (entry == NULL && text->memo->count < TKI_SCAN_MEMO_SIZE) {
        entry = &text->memo->entries[text->memo->count++];
    } else if (entry == NULL) {
        /* Full: replace the shortest scan, the cheapest to redo, if shorter than this one. */
        entry = &text->memo->entries[0];
        for (uint32_t i = 1; i < text->memo->count; i++) {
            tki_scan_entry *other = &text->memo->entries[i];
            if (other->end - other->start < entry->end - entry->start) {
                entry = other;
            }
        }
        if (entry->end - entry->start >= end - start) {
            return;
        }
    }
    entry->kind = kind;
    entry->start = start;
    entry->end = end;
    entry->aux[0] = aux[0];
    entry->aux[1] = aux[1];
    entry->aux[2] = aux[2];
}

enum {
    SCAN_RUN = 0x100,        /* | class mask */
    SCAN_OTHER = 0x200,
    SCAN_NEWLINES = 0x300,   /* | slash */
    SCAN_WHITESPACE = 0x400,
    SCAN_LOWER_WORD = 0x500
};

/* True (and noted) when pos is at the end: the match depends on what follows. */
static inline int at_end(text_view *text, size_t pos) {
    if (pos >= text->len) {
        text->touched_end = 1;
        return 1;
    }
    return 0;
}

typedef struct character {
    uint32_t code_point; /* 0xFFFFFFFF for an invalid byte */
    size_t end;          /* byte just after it             */
    uint8_t klass;       /* TKI_CLASS_* bits               */
} character;

/* The character at pos (pos < len): a multi-byte or invalid sequence. */
static character char_at_slow(text_view *text, size_t pos) {
    const uint8_t *s = text->data + pos;
    size_t left = text->len - pos;
    character c = {UINT32_MAX, pos + 1, 0};
    uint8_t b0 = s[0];
    size_t needed = b0 < 0xC2 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : b0 < 0xF5 ? 4 : 1;
    if (needed > left) {
        /* A sequence cut by the end: more text may complete it. */
        int prefix_ok = 1;
        for (size_t i = 1; i < left; i++) {
            prefix_ok &= (s[i] & 0xC0) == 0x80;
        }
        if (prefix_ok) {
            text->touched_end = 1;
        }
    }
    size_t width;
    if (b0 < 0x80) {
        c.code_point = b0;
    } else if ((width = tki_decode_two_or_three(s, left, &c.code_point)) != 0 ||
               (width = tki_decode_four(s, left, &c.code_point)) != 0) {
        c.end = pos + width;
    }
    if (c.code_point != UINT32_MAX) {
        c.klass = tki_unicode_class(c.code_point);
    }
    return c;
}

/*
 * The character at pos (pos < len); ASCII, most of real text, and valid two-
 * and three-byte sequences with three bytes readable (the letters and
 * punctuation of most other scripts) without a call: such a sequence is
 * whole, so the end of the text plays no part.
 */
static inline character char_at(text_view *text, size_t pos) {
    uint8_t byte = text->data[pos];
    if (byte < 0x80) {
        character c = {byte, pos + 1, tki_ascii_class(byte)};
        return c;
    }
    uint32_t code_point;
    size_t width;
    if (text->len - pos >= 3 && (width = tki_decode_two_or_three(text->data + pos, 3, &code_point)) != 0) {
        character c = {code_point, pos + width, tki_unicode_class(code_point)};
        return c;
    }
    return char_at_slow(text, pos);
}

#define IS_LETTER(c) (((c).klass & TKI_CLASS_LETTER) != 0)
#define IS_NUMBER(c) (((c).klass & TKI_CLASS_NUMBER) != 0)
#define IS_SPACE(c) (((c).klass & TKI_CLASS_SPACE) != 0)
#define IS_OTHER(c) (((c).klass & (TKI_CLASS_LETTER | TKI_CLASS_NUMBER | TKI_CLASS_SPACE)) == 0)
#define IS_NEWLINE(c) ((c).code_point == '\r' || (c).code_point == '\n')

/*
 * From pos, just after a character of n = 2..4 bytes, the end of the whole
 * copies of it that follow: the bytes repeat it for as long as
 * data[x] == data[x - n] (tki_copies_end).  A run of one character (hostile
 * text) then costs a compare per few bytes, not a decode per character; on
 * other text it costs a compare or two where the next character's first bytes
 * differ, before any loop.
 */
static inline size_t copies_end(const uint8_t *data, size_t pos, size_t len, size_t n) {
    if (pos + 1 >= len || data[pos] != data[pos - n] || data[pos + 1] != data[pos + 1 - n]) {
        return pos;
    }
    return tki_copies_end(data, pos, len, n);
}

/*
 * After character c, which starts at pos: the end of c and of the whole copies
 * of it that follow, for a multi-byte c or an ASCII one (a run of "'", "-" or
 * "=" then costs a compare per few bytes, not a character each); c.end for an
 * invalid byte, whose copy may start a valid character (equal bytes are the
 * same character only when the whole sequence is compared).
 */
static inline size_t past_copies(const text_view *text, size_t pos, character c) {
    const size_t width = c.end - pos;
    return width >= 2 || text->data[pos] < 0x80 ? copies_end(text->data, c.end, text->len, width) : c.end;
}

/*
 * From pos, the end of the run of two- and three-byte characters whose class
 * has a bit of `mask`, decoded here rather than by char_at (a call per
 * character), for the runs of letters of most scripts.  It stops before
 * anything else (ASCII, four-byte or invalid sequences, another class, the
 * last two bytes of the text), which the caller's general loop then takes.
 * A character equal to the one before starts a skip of its whole copies.
 * With `tracked` != 0, *after_tracked becomes the end of the last character
 * of the run whose class has a bit of `tracked` (unchanged if none).
 */
static inline size_t wide_run_end(const uint8_t *data, size_t pos, size_t len, uint8_t mask,
                                  uint8_t tracked, size_t *after_tracked) {
    uint32_t previous = UINT32_MAX;
    uint8_t previous_class = 0;
    while (pos + 3 <= len) {
        /* CJK ideographs: no decode, no table (pretokenize_tables.h); other characters
         * pay one compare of their first byte for it. */
        if ((uint8_t)(data[pos] - 0xE4u) < 6u && (mask & TKI_IDEOGRAPH_CLASS) &&
            tki_is_ideograph(data + pos)) {
            do {
                pos += 3;
            } while (pos + 3 <= len && tki_is_ideograph(data + pos));
            if (tracked & TKI_IDEOGRAPH_CLASS) {
                *after_tracked = pos;
            }
            previous = UINT32_MAX;
            continue;
        }
        uint32_t code_point = 0;
        size_t width = tki_decode_two_or_three(data + pos, 3, &code_point); /* three readable */
        if (width == 0) {
            break;
        }
        if (code_point == previous) { /* its bytes repeat the previous character's */
            size_t end = copies_end(data, pos, len, width);
            pos = end > pos ? end : pos + width;
            if (previous_class & tracked) {
                *after_tracked = pos;
            }
            previous = UINT32_MAX;
            continue;
        }
        uint8_t klass = tki_unicode_class(code_point);
        if ((klass & mask) == 0) {
            break;
        }
        previous = code_point;
        previous_class = klass;
        pos += width;
        if (klass & tracked) {
            *after_tracked = pos;
        }
    }
    return pos;
}

/*
 * The character at pos where a run of wide_run_end stopped: its class, and
 * its width in *width, decoded in line; at the end of the text no class and
 * width 0 (noted as looked at); UNDECIDED_CLASS for a four-byte, invalid or
 * cut sequence, which the caller leaves to char_at.
 */
#define UNDECIDED_CLASS 0xFFu

static inline uint8_t wide_run_stop(text_view *text, size_t pos, size_t *width) {
    if (at_end(text, pos)) {
        *width = 0;
        return 0;
    }
    const uint8_t *data = text->data;
    if (data[pos] < 0x80) {
        *width = 1;
        return tki_ascii_class(data[pos]);
    }
    uint32_t code_point;
    *width = tki_decode_two_or_three(data + pos, text->len - pos, &code_point);
    return *width != 0 ? tki_unicode_class(code_point) : UNDECIDED_CLASS;
}

/* End of the maximal run, from pos, of characters having any of `mask`. */
static size_t run_of(text_view *text, size_t pos, uint8_t mask) {
    size_t start = pos;
    tki_scan_entry *memo = memo_find(text, SCAN_RUN | mask, start);
    if (memo != NULL) {
        pos = memo->end;
    }
    for (;;) {
        /* ASCII stretch without decoding (the classes of the masks the patterns use are
         * ranges there); the general loop below handles the rest. */
        switch (mask) {
        case TKI_CLASS_LETTER: pos = tki_ascii_run_end(text->data, pos, text->len, 'a', 'z', 0x20); break;
        case TKI_CLASS_NUMBER: pos = tki_ascii_run_end(text->data, pos, text->len, '0', '9', 0); break;
        case TKI_CLASS_LOWER_LIKE: pos = tki_ascii_run_end(text->data, pos, text->len, 'a', 'z', 0); break;
        case TKI_CLASS_UPPER_LIKE: pos = tki_ascii_run_end(text->data, pos, text->len, 'A', 'Z', 0); break;
        default: break;
        }
        while (pos < text->len && text->data[pos] < 0x80) {
            if ((tki_ascii_class(text->data[pos]) & mask) == 0) {
                return pos;
            }
            pos++;
        }
        pos = wide_run_end(text->data, pos, text->len, mask, 0, NULL);
        if (at_end(text, pos)) {
            break;
        }
        size_t width = 0;
        uint8_t klass = wide_run_stop(text, pos, &width);
        character c = {0, pos + width, klass}; /* (past_copies reads its end) */
        if (klass == UNDECIDED_CLASS) { /* four bytes, invalid, or cut by the end */
            c = char_at(text, pos);
        }
        if ((c.klass & mask) == 0) {
            return pos;
        }
        pos = past_copies(text, pos, c);
    }
    size_t aux[3] = {0, 0, 0};
    memo_store(text, SCAN_RUN | mask, start, pos, aux);
    return pos;
}

/* End of the maximal run of characters of no letter/number/space class. */
static size_t run_of_other(text_view *text, size_t pos) {
    size_t start = pos;
    tki_scan_entry *memo = memo_find(text, SCAN_OTHER, start);
    if (memo != NULL) {
        pos = memo->end;
    }
    while (!at_end(text, pos)) {
        character c = char_at(text, pos);
        if (!IS_OTHER(c)) {
            return pos;
        }
        pos = past_copies(text, pos, c);
    }
    size_t aux[3] = {0, 0, 0};
    memo_store(text, SCAN_OTHER, start, pos, aux);
    return pos;
}

/* End of the maximal run of '\r', '\n' (and '/' when slash is set). */
static size_t run_of_newlines(text_view *text, size_t pos, int slash) {
    size_t start = pos;
    tki_scan_entry *memo = memo_find(text, SCAN_NEWLINES | (uint32_t)slash, start);
    if (memo != NULL) {
        pos = memo->end;
    }
    while (!at_end(text, pos)) {
        uint8_t byte = text->data[pos];
        if (!(byte == '\r' || byte == '\n' || (slash && byte == '/'))) {
            return pos;
        }
        pos++;
    }
    size_t aux[3] = {0, 0, 0};
    memo_store(text, SCAN_NEWLINES | (uint32_t)slash, start, pos, aux);
    return pos;
}

/*
 * The whitespace alternatives shared by all three patterns, at a whitespace
 * character.  With `newline_rule` (cl100k, o200k): \s*[\r\n] ends after the
 * run's last CR/LF.  `end_rule` (r50k, cl100k): \s++$.  Then \s+(?!\S): the
 * whole run at the end, else all but its last character when it has two or
 * more; else the single character (r50k, cl100k's \s; o200k's \s+ gives the
 * same, the run being one character then).
 */
static size_t match_whitespace(text_view *text, size_t pos, int newline_rule, int end_rule) {
    size_t last_start = pos, after_last_newline = 0, characters = 0, end = pos;
    tki_scan_entry *memo = memo_find(text, SCAN_WHITESPACE, pos);
    if (memo != NULL) {
        end = memo->end;
        last_start = memo->aux[0];
        after_last_newline = memo->aux[1];
        characters = memo->aux[2];
    }
    int reached_end = 1;
    for (;;) {
        /* ASCII whitespace without decoding: sixteen bytes at a time where they all are (a
         * long run: hostile text, indentation; SSE2), then eight spaces or eight LFs at a
         * compare; other characters through char_at. */
        const size_t run_end = tki_ascii_space_run(text->data, end, text->len, &after_last_newline);
        if (run_end > end) {
            characters += run_end - end;
            last_start = run_end - 1;
            end = run_end;
        }
        while (end < text->len && text->data[end] < 0x80) {
            uint8_t byte = text->data[end];
            if ((tki_ascii_class(byte) & TKI_CLASS_SPACE) == 0) {
                break;
            }
            if (byte == '\r' || byte == '\n') {
                after_last_newline = end + 1;
            }
            last_start = end++;
            characters++;
        }
        if (at_end(text, end)) {
            break;
        }
        character c = char_at(text, end);
        if (!IS_SPACE(c)) {
            reached_end = 0;
            break;
        }
        if (IS_NEWLINE(c)) {
            after_last_newline = c.end;
        }
        last_start = end;
        end = c.end;
        characters++;
    }
    if (reached_end) {
        size_t aux[3] = {last_start, after_last_newline, characters};
        memo_store(text, SCAN_WHITESPACE, pos, end, aux);
    }
    if (end_rule && end == text->len) {
        return end;
    }
    if (newline_rule && after_last_newline != 0) {
        return after_last_newline;
    }
    if (end == text->len) {
        return end;
    }
    return characters >= 2 ? last_start : end;
}

/* The letter after an apostrophe: 1 s, 2 t, 3 d, 4 m, 5 l, 6 v, 7 r, 8 e, 0 other. */
static int contraction_letter(text_view *text, size_t pos, int ignore_case, size_t *end) {
    if (at_end(text, pos)) {
        return 0;
    }
    character c = char_at(text, pos);
    *end = c.end;
    uint32_t cp = c.code_point;
    if (ignore_case) {
        if (cp == 0x17F) { /* LATIN SMALL LETTER LONG S folds to s */
            return 1;
        }
        if (cp >= 'A' && cp <= 'Z') {
            cp += 'a' - 'A';
        }
    }
    switch (cp) {
    case 's': return 1;
    case 't': return 2;
    case 'd': return 3;
    case 'm': return 4;
    case 'l': return 5;
    case 'v': return 6;
    case 'r': return 7;
    case 'e': return 8;
    default: return 0;
    }
}

/* '(?:[sdmt]|ll|ve|re) at an apostrophe: the end, or 0. */
static size_t match_contraction(text_view *text, size_t pos, int ignore_case) {
    if (at_end(text, pos) || text->data[pos] != '\'') {
        return 0;
    }
    size_t first_end = 0, second_end = 0;
    int first = contraction_letter(text, pos + 1, ignore_case, &first_end);
    if (first >= 1 && first <= 4) {
        return first_end;
    }
    int second = contraction_letter(text, first_end, ignore_case, &second_end);
    if ((first == 5 && second == 5) || (first == 6 && second == 8) || (first == 7 && second == 8)) {
        return second_end;
    }
    return 0;
}

/* o200k's (?i:'s|'t|'re|'ve|'m|'ll|'d)? after a letter run: its end (pos if none). */
static size_t optional_contraction(text_view *text, size_t pos) {
    size_t end = match_contraction(text, pos, 1);
    return end != 0 ? end : pos;
}

/* \p{N}{1,3}, the first number being `first`: the end of the match. */
static size_t up_to_three_numbers(text_view *text, character first) {
    size_t end = first.end;
    for (int more = 0; more < 2 && !at_end(text, end); more++) {
        character digit = char_at(text, end);
        if (!IS_NUMBER(digit)) {
            break;
        }
        end = digit.end;
    }
    return end;
}

/*
 * Where " ?[^\s\p{L}\p{N}]+" starts its run at pos (c being the character
 * there): after an optional space, or at pos; SIZE_MAX when it cannot match.
 */
static size_t other_run_start(text_view *text, character c, size_t pos) {
    if (c.code_point == ' ' && !at_end(text, c.end) && IS_OTHER(char_at(text, c.end))) {
        return c.end;
    }
    return IS_OTHER(c) ? pos : SIZE_MAX;
}

static size_t match_r50k(text_view *text, size_t pos) {
    character c = char_at(text, pos);
    if (text->memo == NULL && (IS_LETTER(c) || c.code_point == ' ')) { /*  ?\p{L}++ at once */
        size_t start = IS_LETTER(c) ? pos : c.end, end = run_of(text, start, TKI_CLASS_LETTER);
        if (end > start) {
            return end;
        }
    }
    size_t end = match_contraction(text, pos, 0);
    if (end != 0) {
        return end;
    }
    size_t body = pos;
    character first = c;
    if (c.code_point == ' ' && !at_end(text, c.end)) { /* " ?" before a letter/number/other run */
        character next = char_at(text, c.end);
        if (!IS_SPACE(next)) {
            body = c.end;
            first = next;
        }
    }
    if (IS_LETTER(first)) {
        return run_of(text, body, TKI_CLASS_LETTER);
    }
    if (IS_NUMBER(first)) {
        return run_of(text, body, TKI_CLASS_NUMBER);
    }
    if (IS_OTHER(first)) {
        return run_of_other(text, body);
    }
    return match_whitespace(text, pos, 0, 1);
}

static size_t match_cl100k(text_view *text, size_t pos) {
    if (tki_three_ascii_digits(text->data, text->len, pos)) { /* internal.h says why */
        return pos + 3;
    }
    character c = char_at(text, pos);
    if (text->memo == NULL && c.code_point != '\'' && !IS_NEWLINE(c) && !IS_NUMBER(c)) {
        size_t start = IS_LETTER(c) ? pos : c.end, end = run_of(text, start, TKI_CLASS_LETTER);
        if (end > start) { /* [^\r\n\p{L}\p{N}]?+\p{L}++ at once */
            return end;
        }
    }
    size_t end = match_contraction(text, pos, 1);
    if (end != 0) {
        return end;
    }
    if (IS_LETTER(c)) {
        return run_of(text, pos, TKI_CLASS_LETTER);
    }
    if (!IS_NEWLINE(c) && !IS_NUMBER(c) && !at_end(text, c.end)) {
        character next = char_at(text, c.end); /* [^\r\n\p{L}\p{N}]?+\p{L}++ */
        if (IS_LETTER(next)) {
            return run_of(text, c.end, TKI_CLASS_LETTER);
        }
    }
    if (IS_NUMBER(c)) { /* \p{N}{1,3}+ */
        return up_to_three_numbers(text, c);
    }
    size_t body = other_run_start(text, c, pos);
    if (body != SIZE_MAX) { /*  ?[^\s\p{L}\p{N}]++[\r\n]*+ */
        return run_of_newlines(text, run_of_other(text, body), 0);
    }
    return match_whitespace(text, pos, 1, 1);
}

/* o200k's first alternative from `start` (after an optional prefix): U*W+C?, or 0. */
static size_t o200k_lower_word(text_view *text, size_t start) {
    size_t end = start, after_last_lower = 0;
    tki_scan_entry *memo = memo_find(text, SCAN_LOWER_WORD, start);
    if (memo != NULL) {
        end = memo->end;
        after_last_lower = memo->aux[0];
    }
    int reached_end = 1;
    while (!at_end(text, end)) {
        end = wide_run_end(text->data, end, text->len, TKI_CLASS_UPPER_LIKE, TKI_CLASS_LOWER_LIKE,
                           &after_last_lower);
        if (at_end(text, end)) {
            break;
        }
        character c = char_at(text, end);
        if (!(c.klass & TKI_CLASS_UPPER_LIKE)) {
            reached_end = 0;
            break;
        }
        size_t copies = past_copies(text, end, c);
        if (c.klass & TKI_CLASS_LOWER_LIKE) {
            after_last_lower = copies;
        }
        end = copies;
    }
    if (reached_end) {
        size_t aux[3] = {after_last_lower, 0, 0};
        memo_store(text, SCAN_LOWER_WORD, start, end, aux);
    }
    if (!reached_end && (char_at(text, end).klass & TKI_CLASS_LOWER_LIKE)) {
        return optional_contraction(text, run_of(text, end, TKI_CLASS_LOWER_LIKE));
    }
    if (after_last_lower != 0) { /* U* gives characters back until W+ can take one */
        return optional_contraction(text, after_last_lower);
    }
    return 0;
}


/*
 * o200k_lower_word for a word of ASCII, two- and three-byte characters (the
 * words of most scripts), without the general scans' calls: U*, noting the
 * end of its last W character, then W+ if the character after U* is a W, else
 * U* gives back down to that end.  In U*, runs of ASCII capitals go by
 * tki_ascii_run_end, of wide characters by wide_run_end, and what stops them
 * (an ASCII letter after wide ones, the last two bytes) one character at a
 * time; W+ is run_of.  0 when this does not decide (a four-byte or invalid
 * sequence in U*, or no W at all): o200k_lower_word then matches.  Not with a
 * memo (a stream), whose scans resume there.  *no_word becomes 1 when the
 * character at `start` (or the end of the text) is in neither U nor W: then
 * neither U*W+C? nor U+W*C? matches there, and the caller need not try them.
 */
static size_t o200k_wide_word(text_view *text, size_t start, int *no_word) {
    const uint8_t *data = text->data;
    size_t len = text->len, end = start, after_last_lower = 0, width = 0;
    uint8_t klass;
    *no_word = 0;
    for (;;) { /* U* */
        end = tki_ascii_run_end(data, end, len, 'A', 'Z', 0);
        end = wide_run_end(data, end, len, TKI_CLASS_UPPER_LIKE, TKI_CLASS_LOWER_LIKE,
                           &after_last_lower);
        klass = wide_run_stop(text, end, &width);
        if (klass == UNDECIDED_CLASS) {
            return 0;
        }
        if (!(klass & TKI_CLASS_UPPER_LIKE)) {
            break;
        }
        end += width;
        if (klass & TKI_CLASS_LOWER_LIKE) {
            after_last_lower = end;
        }
    }
    if (!(klass & TKI_CLASS_LOWER_LIKE)) {
        *no_word = end == start; /* (klass: in neither U nor W, or the end of the text) */
        return after_last_lower != 0 ? optional_contraction(text, after_last_lower) : 0;
    }
    return optional_contraction(text, run_of(text, end + width, TKI_CLASS_LOWER_LIKE)); /* W+ */
}

/* o200k's second alternative from `start`: U+W*C?, or 0. */
static size_t o200k_upper_word(text_view *text, size_t start) {
    if (at_end(text, start) || !(char_at(text, start).klass & TKI_CLASS_UPPER_LIKE)) {
        return 0;
    }
    size_t end = run_of(text, start, TKI_CLASS_UPPER_LIKE);
    return optional_contraction(text, run_of(text, end, TKI_CLASS_LOWER_LIKE));
}

/*
 * o200k's word alternatives for a word of ASCII letters from `start` that
 * ends before an ASCII byte.  In ASCII, U is [A-Z] and W is [a-z] (no ASCII
 * character is in both), so U*W+C? takes the capitals and then the small
 * letters, and where there are no small letters U+W*C? takes the capitals:
 * either way both runs, then C?.  0 when this does not decide: no letter at
 * `start`, or a non-ASCII byte or the end of the text right after the runs
 * (a longer word, or more text, could change the match).
 */
static size_t o200k_ascii_word(text_view *text, size_t start) {
    const uint8_t *data = text->data;
    size_t len = text->len;
    size_t end = tki_ascii_run_end(data, tki_ascii_run_end(data, start, len, 'A', 'Z', 0), len, 'a', 'z', 0);
    if (end == start || end >= len || data[end] >= 0x80) {
        return 0;
    }
    return optional_contraction(text, end);
}

/* What o200k_ascii_shortcut found out about the word alternatives at pos. */
enum { WORDS_UNDECIDED, WORDS_FAIL, WORDS_MATCH };

/*
 * The four word attempts of match_o200k (with and without the prefix, U*W+C?
 * then U+W*C?) for an ASCII character c at pos, decided from the bytes where
 * that is simple: a digit, CR or LF starts no word (it is no prefix, and no
 * letter); a prefix character followed by an ASCII non-letter neither; an
 * ASCII word (o200k_ascii_word) after the prefix or at pos is the match.
 * Not the last with a memo (a stream): the word scan does not resume, so a
 * stream's open run of letters, matched again after every feed, would be
 * scanned from its start each time; the general scans resume from the memo.
 */
static int o200k_ascii_shortcut(text_view *text, size_t pos, character c, int has_prefix,
                                size_t *end) {
    if (IS_NUMBER(c) || IS_NEWLINE(c)) {
        return WORDS_FAIL;
    }
    size_t start = pos;
    if (has_prefix) {
        if (pos + 1 >= text->len || text->data[pos + 1] >= 0x80) {
            return WORDS_UNDECIDED;
        }
        if (!(tki_ascii_class(text->data[pos + 1]) & TKI_CLASS_LETTER)) {
            return WORDS_FAIL;
        }
        start = pos + 1;
    }
    if (text->memo != NULL) {
        return WORDS_UNDECIDED;
    }
    *end = o200k_ascii_word(text, start);
    return *end != 0 ? WORDS_MATCH : WORDS_UNDECIDED;
}

static size_t match_o200k(text_view *text, size_t pos) {
    if (tki_three_ascii_digits(text->data, text->len, pos)) { /* internal.h says why */
        return pos + 3;
    }
    character c = char_at(text, pos);
    int has_prefix = !IS_NEWLINE(c) && !IS_LETTER(c) && !IS_NUMBER(c);
    size_t end = 0;
    int words = c.code_point < 0x80 ? o200k_ascii_shortcut(text, pos, c, has_prefix, &end)
                                    : WORDS_UNDECIDED;
    if (words == WORDS_MATCH) {
        return end;
    }
    int no_word_after_prefix = 0; /* o200k_wide_word found neither U nor W after the prefix */
    if (words == WORDS_UNDECIDED && text->memo == NULL && (has_prefix || IS_LETTER(c)) &&
        (end = o200k_wide_word(text, has_prefix ? c.end : pos, &no_word_after_prefix)) != 0) {
        return end;
    }
    /* A word at pos itself needs c in U or W: U*W+ takes no character of neither class
     * into U* and none into W+, U+ needs c in U (punctuation, symbols: no scans); after
     * the prefix likewise the character there. */
    int word_at_pos = (c.klass & (TKI_CLASS_UPPER_LIKE | TKI_CLASS_LOWER_LIKE)) != 0;
    int word_after_prefix = has_prefix && !no_word_after_prefix;
    if (words == WORDS_UNDECIDED &&
        ((word_after_prefix && (end = o200k_lower_word(text, c.end)) != 0) ||
        (word_at_pos && (end = o200k_lower_word(text, pos)) != 0) ||
        (word_after_prefix && (end = o200k_upper_word(text, c.end)) != 0) ||
        (word_at_pos && (end = o200k_upper_word(text, pos)) != 0))) {
        return end;
    }
    if (IS_NUMBER(c)) { /* \p{N}{1,3} */
        return up_to_three_numbers(text, c);
    }
    size_t body = other_run_start(text, c, pos);
    if (body != SIZE_MAX) { /*  ?[^\s\p{L}\p{N}]+[\r\n/]* */
        return run_of_newlines(text, run_of_other(text, body), 1);
    }
    return match_whitespace(text, pos, 1, 0);
}

/* The full matcher at pos (pos < len), for a TKI_PATTERN_* (pos itself for another). */
static size_t match_full(text_view *text, int32_t pattern, size_t pos) {
    switch (pattern) {
    case TKI_PATTERN_R50K: return match_r50k(text, pos);
    case TKI_PATTERN_CL100K: return match_cl100k(text, pos);
    case TKI_PATTERN_O200K: return match_o200k(text, pos);
    default: return pos;
    }
}

size_t tki_pretokenize_match_ex(int32_t pattern, const uint8_t *data, size_t len, size_t pos,
                                tki_scan_memo *memo, int memo_writable, int *touched_end) {
    text_view text = {data, len, 0, memo, memo_writable};
    int known = pattern >= TKI_PATTERN_R50K && pattern <= TKI_PATTERN_O200K;
    /* A probe of a stream's open piece (a read-only memo) goes straight to the full matcher:
     * the piece's scans are in the memo, where the shortcut would read 64 bytes again. */
    int shortcut = known && !(memo != NULL && !memo_writable && memo->count > 0);
    size_t end = shortcut && pos < len ? tki_pretokenize_ascii(pattern, data, len, pos, 0) : 0;
    if (end == 0) { /* else decided before the end of the text: touched_end stays 0 */
        end = pos < len ? match_full(&text, pattern, pos) : pos;
    }
    if (touched_end != NULL) {
        *touched_end = text.touched_end;
    }
    return end;
}

/*
 * The memo for a text that now starts `shift` bytes later: emptied (shift >
 * 0).  Its scans are of the open piece that just became final; a scan of the
 * new open piece was made in the same call that moved it, over text that call
 * read anyway, so redoing it once costs no more than that call did.
 */
void tki_scan_memo_shift(tki_scan_memo *memo, size_t shift) {
    if (shift > 0) {
        memo->count = 0;
    }
}

size_t tki_pretokenize_match(int32_t pattern, const uint8_t *data, size_t len, size_t pos) {
    text_view text = {data, len, 0, NULL, 0};
    return match_full(&text, pattern, pos);
}

size_t tki_pretokenize_match_open(int32_t pattern, const uint8_t *data, size_t len, size_t pos,
                                  int *touched_end) {
    text_view text = {data, len, 0, NULL, 0};
    size_t end = match_full(&text, pattern, pos);
    *touched_end = text.touched_end;
    return end;
}

int32_t tki_pretokenize(int32_t pattern, const uint8_t *data, size_t data_len, size_t *piece_ends,
                        size_t capacity, size_t *out_count) {
    if (out_count == NULL || (data == NULL && data_len > 0) || (piece_ends == NULL && capacity > 0) ||
        pattern < TKI_PATTERN_R50K || pattern > TKI_PATTERN_O200K) {
        return TKI_ERR_ARGUMENT;
    }
    size_t count = 0;
    tki_piece_cursor cursor = {0};
    for (size_t pos = 0; pos < data_len;) {
        size_t end = tki_piece_cursor_next(&cursor, pattern, data, data_len, pos);
        if (end <= pos || end > data_len) {
            return TKI_ERR_INTERNAL;
        }
        if (count >= capacity) {
            return TKI_ERR_ARGUMENT;
        }
        piece_ends[count++] = end;
        pos = end;
    }
    *out_count = count;
    return TKI_OK;
}
