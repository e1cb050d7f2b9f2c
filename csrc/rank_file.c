/*
 * rank_file.c — reading tiktoken rank files (`.tiktoken`): one line
 * `base64(token bytes) SPACE rank` per token, straight into the flat arrays
 * tki_vocab_build takes, so that loading a vocabulary never makes one Python
 * object per token.
 *
 * The rules are those of tiktoken_inc/load.py, line for line, so that both
 * report the same first problem: a line is `[A-Za-z0-9+/]+={0,2} [0-9]+`,
 * optionally followed by '\r' when a '\n' ends it; empty lines (and a lone
 * '\r') are skipped; the base64 must decode as Python's binascii.a2b_base64
 * decodes it (a data length of 4k+1 never does, 4k+2 needs "==", 4k+3 needs
 * "=", extra '=' after a full quad are ignored).  The first malformed line in
 * file order wins; a last line that ends in '\r' without '\n' makes the file
 * malformed as a whole (line 0).  Then, in this order: a rank that does not
 * fit below 2^32 - 1 (TKI_ERR_RANK_RANGE: the caller may read the file some
 * other way), no token at all, and the first line (file order) that repeats
 * an earlier line's token (checked first) or rank.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Value of a base64 digit, or -1. */
static const int8_t BASE64_DIGIT[256] = {
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 62, -1, -1, -1, 63,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, -1, -1, -1, -1, -1, -1,
    -1, 0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14,
    15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, -1, -1, -1, -1, -1,
    -1, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
    41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
};

/* The first rank that does not fit: TKI_NONE (2^32 - 1) means "no token". */
#define RANK_LIMIT ((uint64_t)TKI_NONE)

/* One line, split into its fields (valid only when parse_line says TKI_OK). */
typedef struct parsed_line {
    size_t digits_start;   /* the base64 digits: text[digits_start .. +digit_count) */
    size_t digit_count;
    uint64_t rank;         /* RANK_LIMIT when it does not fit */
} parsed_line;

/* Checks text[start..end) (no '\n', any '\r' already removed) as one line. */
static int32_t parse_line(const uint8_t *text, size_t start, size_t end, parsed_line *out) {
    size_t at = start;
    while (at < end && BASE64_DIGIT[text[at]] >= 0) {
        at++;
    }
    size_t digit_count = at - start;
    uint32_t pads = 0;
    while (at < end && text[at] == '=' && pads < 2) {
        pads++;
        at++;
    }
    if (digit_count == 0 || at >= end || text[at] != ' ') {
        return TKI_ERR_MALFORMED_LINE;
    }
    at++;
    size_t rank_start = at;
    uint64_t rank = 0;
    while (at < end && text[at] >= '0' && text[at] <= '9') {
        if (rank < RANK_LIMIT) {
            rank = rank * 10 + (uint64_t)(text[at] - '0');
        }
        at++;
    }
    if (at == rank_start || at != end) {
        return TKI_ERR_MALFORMED_LINE;
    }
    /* binascii.a2b_base64: what a final partial quad needs. */
    size_t partial = digit_count % 4;
    if (partial == 1 || (partial == 2 && pads < 2) || (partial == 3 && pads < 1)) {
        return TKI_ERR_BAD_BASE64;
    }
    out->digits_start = start;
    out->digit_count = digit_count;
    out->rank = rank < RANK_LIMIT ? rank : RANK_LIMIT;
    return TKI_OK;
}

/* Decodes count base64 digits (all valid) into out; returns the number of bytes. */
static size_t decode_base64(const uint8_t *digits, size_t count, uint8_t *out) {
    size_t used = 0;
    size_t i = 0;
    for (; i + 4 <= count; i += 4) {
        uint32_t group = ((uint32_t)BASE64_DIGIT[digits[i]] << 18) |
                         ((uint32_t)BASE64_DIGIT[digits[i + 1]] << 12) |
                         ((uint32_t)BASE64_DIGIT[digits[i + 2]] << 6) |
                         (uint32_t)BASE64_DIGIT[digits[i + 3]];
        out[used++] = (uint8_t)(group >> 16);
        out[used++] = (uint8_t)(group >> 8);
        out[used++] = (uint8_t)group;
    }
    if (count - i >= 2) {
        uint32_t group = ((uint32_t)BASE64_DIGIT[digits[i]] << 18) |
                         ((uint32_t)BASE64_DIGIT[digits[i + 1]] << 12);
        if (count - i == 3) {
            group |= (uint32_t)BASE64_DIGIT[digits[i + 2]] << 6;
        }
        out[used++] = (uint8_t)(group >> 16);
        if (count - i == 3) {
            out[used++] = (uint8_t)(group >> 8);
        }
    }
    return used;
}

static void set_error(tki_rank_file_error *error, uint64_t line, size_t start, size_t end) {
    error->line = line;
    error->line_start = start;
    error->line_end = end;
    error->earlier_line = 0;
}

void tki_rank_list_free(tki_rank_list *list) {
    if (list == NULL) {
        return;
    }
    free(list->bytes);
    free(list->offsets);
    free(list->ranks);
    free(list->lines);
    memset(list, 0, sizeof(*list));
}

/*
 * Every line, checked and decoded into *list (allocated here); on failure
 * the list is freed and *error says where.  Duplicates are not looked for.
 */
static int32_t read_lines(const uint8_t *text, size_t len, tki_rank_list *list,
                          tki_rank_file_error *error) {
    memset(list, 0, sizeof(*list));
    size_t newlines = 0;
    for (const uint8_t *at = text; at != NULL && at < text + len;) {
        at = memchr(at, '\n', (size_t)(text + len - at));
        if (at != NULL) {
            newlines++;
            at++;
        }
    }
    /* A line holds at least three bytes, so it yields fewer token bytes than it has. */
    size_t capacity = newlines + 1;
    if (capacity > (size_t)UINT32_MAX - 1 || len > SIZE_MAX / 3) {
        return TKI_ERR_ARGUMENT;
    }
    list->bytes = malloc(len / 4 * 3 + 3);
    list->offsets = malloc((capacity + 1) * sizeof(uint64_t));
    list->ranks = malloc(capacity * sizeof(uint32_t));
    list->lines = malloc(capacity * sizeof(uint64_t));
    if (list->bytes == NULL || list->offsets == NULL || list->ranks == NULL ||
        list->lines == NULL) {
        tki_rank_list_free(list);
        return TKI_ERR_NOMEM;
    }
    int32_t status = TKI_OK;
    uint64_t line = 0;
    uint64_t out_of_range_line = 0;
    size_t out_of_range_start = 0, out_of_range_end = 0;
    uint64_t used = 0;
    uint32_t count = 0;
    list->offsets[0] = 0;
    for (size_t start = 0; start < len;) {
        const uint8_t *newline = memchr(text + start, '\n', len - start);
        size_t end = newline != NULL ? (size_t)(newline - text) : len;
        size_t content_end = end;
        int carriage_return = content_end > start && text[content_end - 1] == '\r';
        if (carriage_return) {
            content_end--;
        }
        line++;
        if (content_end > start) {
            parsed_line parsed;
            status = parse_line(text, start, content_end, &parsed);
            if (status != TKI_OK) {
                set_error(error, line, start, end);
                break;
            }
            if (parsed.rank == RANK_LIMIT && out_of_range_line == 0) {
                out_of_range_line = line;
                out_of_range_start = start;
                out_of_range_end = end;
            }
            used += decode_base64(text + parsed.digits_start, parsed.digit_count,
                                  list->bytes + used);
            list->ranks[count] = (uint32_t)(parsed.rank < RANK_LIMIT ? parsed.rank : 0);
            list->lines[count] = line;
            count++;
            list->offsets[count] = used;
        }
        if (newline == NULL && carriage_return) {
            /* load.py's whole-file pattern wants '\n' after a '\r'. */
            status = TKI_ERR_MALFORMED_LINE;
            set_error(error, 0, 0, 0);
            break;
        }
        start = end + 1;
    }
    if (status == TKI_OK && out_of_range_line != 0) {
        status = TKI_ERR_RANK_RANGE;
        set_error(error, out_of_range_line, out_of_range_start, out_of_range_end);
    } else if (status == TKI_OK && count == 0) {
        status = TKI_ERR_NO_TOKENS;
        set_error(error, 0, 0, 0);
    }
    if (status != TKI_OK) {
        tki_rank_list_free(list);
        return status;
    }
    list->count = count;
    return TKI_OK;
}

static uint64_t token_hash(const uint8_t *data, uint64_t len) {
    uint64_t hash = 0x9e3779b97f4a7c15ull ^ len;
    for (uint64_t i = 0; i < len; i++) {
        hash = (hash ^ data[i]) * 0x100000001b3ull;
    }
    return hash ^ (hash >> 29);
}

/*
 * The first line (file order) whose token or rank an earlier line already
 * gave: TKI_ERR_DUPLICATE_BYTES / _RANK with *error filled, or TKI_OK.
 */
static int32_t find_first_duplicate(const uint8_t *text, size_t len, const tki_rank_list *list,
                                    tki_rank_file_error *error) {
    uint64_t slots = 16;
    while (slots < (uint64_t)list->count * 2) {
        slots *= 2;
    }
    /* Two open-addressing sets of token indices + 1: by bytes, and by rank (any rank). */
    uint32_t *by_bytes = calloc((size_t)slots, sizeof(uint32_t));
    uint32_t *by_rank = calloc((size_t)slots, sizeof(uint32_t));
    int32_t status = by_bytes != NULL && by_rank != NULL ? TKI_OK : TKI_ERR_NOMEM;
    for (uint32_t i = 0; i < list->count && status == TKI_OK; i++) {
        const uint8_t *data = list->bytes + list->offsets[i];
        uint64_t length = list->offsets[i + 1] - list->offsets[i];
        uint32_t earlier = 0;
        uint64_t slot = token_hash(data, length) & (slots - 1);
        for (; by_bytes[slot] != 0; slot = (slot + 1) & (slots - 1)) {
            uint32_t other = by_bytes[slot] - 1;
            if (list->offsets[other + 1] - list->offsets[other] == length &&
                memcmp(list->bytes + list->offsets[other], data, (size_t)length) == 0) {
                earlier = other + 1;
                status = TKI_ERR_DUPLICATE_BYTES;
                break;
            }
        }
        if (status == TKI_OK) {
            by_bytes[slot] = i + 1;
            slot = ((list->ranks[i] * 0x9e3779b97f4a7c15ull) >> 20) & (slots - 1);
            for (; by_rank[slot] != 0; slot = (slot + 1) & (slots - 1)) {
                if (list->ranks[by_rank[slot] - 1] == list->ranks[i]) {
                    earlier = by_rank[slot];
                    status = TKI_ERR_DUPLICATE_RANK;
                    break;
                }
            }
            by_rank[slot] = i + 1;
        }
        if (status != TKI_OK) {
            /* The line's bytes: from its first byte to its '\n' (or the end). */
            uint64_t line = list->lines[i];
            size_t start = 0;
            for (uint64_t seen = 1; seen < line && start < len; start++) {
                seen += text[start] == '\n';
            }
            const uint8_t *newline = memchr(text + start, '\n', len - start);
            set_error(error, line, start, newline != NULL ? (size_t)(newline - text) : len);
            error->earlier_line = list->lines[earlier - 1];
        }
    }
    free(by_bytes);
    free(by_rank);
    return status;
}

int32_t tki_rank_file_parse(const uint8_t *text, size_t len, tki_rank_list *out_list,
                            tki_rank_file_error *out_error) {
    tki_rank_file_error unused_error;
    if (out_error == NULL) {
        out_error = &unused_error;
    }
    set_error(out_error, 0, 0, 0);
    if (out_list == NULL || (text == NULL && len > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    memset(out_list, 0, sizeof(*out_list));
    int32_t status = read_lines(text, len, out_list, out_error);
    if (status != TKI_OK) {
        return status;
    }
    status = find_first_duplicate(text, len, out_list, out_error);
    if (status != TKI_OK) {
        tki_rank_list_free(out_list);
        return status;
    }
    set_error(out_error, 0, 0, 0);
    return TKI_OK;
}

int32_t tki_vocab_build_from_rank_file(const uint8_t *text, size_t len,
                                       const uint8_t *special_bytes,
                                       const uint64_t *special_offsets,
                                       const uint32_t *special_ranks, uint32_t special_count,
                                       tki_vocab **out_vocab, tki_rank_file_error *out_error,
                                       uint32_t *error_index) {
    tki_rank_file_error unused_error;
    uint32_t unused_index = 0;
    if (out_error == NULL) {
        out_error = &unused_error;
    }
    if (error_index == NULL) {
        error_index = &unused_index;
    }
    set_error(out_error, 0, 0, 0);
    *error_index = UINT32_MAX;
    if (out_vocab == NULL || (text == NULL && len > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    *out_vocab = NULL;
    tki_rank_list list;
    int32_t status = read_lines(text, len, &list, out_error);
    if (status != TKI_OK) {
        return status;
    }
    struct tki_vocab *vocab = calloc(1, sizeof(*vocab));
    if (vocab == NULL) {
        tki_rank_list_free(&list);
        return TKI_ERR_NOMEM;
    }
    status = tki_token_table_build(vocab, list.bytes, list.offsets, list.ranks, list.count,
                                   special_bytes, special_offsets, special_ranks, special_count,
                                   error_index);
    if ((status == TKI_ERR_DUPLICATE_BYTES || status == TKI_ERR_DUPLICATE_RANK) &&
        *error_index < list.count) {
        /* The table names some duplicate; the file's first one is what a reader wants. */
        int32_t found = find_first_duplicate(text, len, &list, out_error);
        if (found != TKI_OK) {
            status = found;
        }
    } else if (status != TKI_OK && *error_index < list.count) {
        out_error->line = list.lines[*error_index];
    }
    /* The table has its own copy: the list goes before the big tables are made. */
    tki_rank_list_free(&list);
    if (status == TKI_OK) {
        status = tki_vocab_derive_tables(vocab);
    }
    if (status != TKI_OK) {
        tki_vocab_free(vocab);
        return status;
    }
    *out_vocab = vocab;
    return TKI_OK;
}
