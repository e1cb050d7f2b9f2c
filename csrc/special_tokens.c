/*
 * special_tokens.c — special tokens in text: an immutable matcher over a
 * small set of byte strings (the allowed special tokens, or the disallowed
 * ones), the search for them, and the encode that cuts text at them.
 *
 * tiktoken finds special tokens with a regex alternation of the escaped
 * tokens: the leftmost occurrence wins, and after a match the search goes on
 * at its end.  Where several tokens start at the leftmost position (one is a
 * prefix of another), tiktoken takes the first in its alternation, whose
 * order is a hash map's iteration order (arbitrary per token set); here the
 * longest one wins, deterministically.
 *
 * Time is linear in the text whatever the strings are.  The longest string
 * starting at each position p is what the search needs; it comes from an
 * Aho-Corasick automaton over the *reversed* strings, run backwards over a
 * window of positions [begin, end) plus the longest string's length - 1
 * bytes after it (what a string starting before `end` can reach).  Windows
 * are computed only where some string's first byte occurs, never overlap,
 * and are at least four longest-strings wide, so the backward scans cost at
 * most 1.25 times the text plus one window per candidate region.  A forward
 * automaton cannot do this without rescanning after each match, which is
 * quadratic in the string length on inputs like "aaaa..." against
 * {"a", "aaaaab"}.
 *
 * The automaton is a trie of the reversed strings in breadth-first order (a
 * state's children are consecutive states, sorted by byte) with failure
 * links; a step follows failure links until a child matches, which costs
 * amortised O(1) per byte (each failure step shortens the match).
 *
 * Between the special tokens, each stretch is encoded on its own by the
 * engine of encode.c, so a pattern's end-of-text rules see the stretch's end,
 * as in tiktoken.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct tki_special_matcher {
    uint32_t string_count;
    uint32_t state_count;
    uint32_t longest;           /* bytes of the longest string (0: no strings)      */
    uint32_t *string_id;        /* by string: the id the encoder writes for it       */
    uint32_t *string_length;    /* by string                                         */
    /* The trie of the reversed strings, breadth-first; state 0 is the root. */
    uint8_t *state_byte;        /* by state: the byte on the edge into it            */
    uint32_t *first_child;      /* by state: its first child (children: consecutive) */
    uint32_t *child_count;      /* by state                                          */
    uint32_t *failure;          /* by state: the longest proper suffix that is a state */
    uint32_t *longest_string;   /* by state: the longest string that is a suffix of
                                   the state's (reversed) bytes, or TKI_NONE          */
    uint8_t first_byte[256];    /* 1 where some string starts with that byte        */
    int32_t only_first_byte;    /* the one first byte of every string, or -1         */
    /* The strings themselves, for the prefix test of streams (tki_special_matcher_open_start). */
    uint8_t *string_bytes;      /* laid end to end                                   */
    uint64_t *string_offset;    /* by string: its start in string_bytes              */
    uint32_t *sorted;           /* the strings' indexes in byte order                */
};

/* ------------------------------------------------------------------ building */

/* The trie while it is built: depth-first, children in sorted sibling lists. */
typedef struct draft_trie {
    uint32_t count;
    uint32_t *first_child;   /* TKI_NONE: none */
    uint32_t *next_sibling;  /* TKI_NONE: none */
    uint32_t *string;        /* the string that ends here, or TKI_NONE */
    uint8_t *byte;
} draft_trie;

static void draft_free(draft_trie *draft) {
    free(draft->first_child);
    free(draft->next_sibling);
    free(draft->string);
    free(draft->byte);
}

static int32_t draft_init(draft_trie *draft, size_t capacity) {
    draft->count = 1;
    draft->first_child = malloc(capacity * sizeof(uint32_t));
    draft->next_sibling = malloc(capacity * sizeof(uint32_t));
    draft->string = malloc(capacity * sizeof(uint32_t));
    draft->byte = malloc(capacity);
    if (draft->first_child == NULL || draft->next_sibling == NULL || draft->string == NULL ||
        draft->byte == NULL) {
        return TKI_ERR_NOMEM;
    }
    draft->first_child[0] = TKI_NONE;
    draft->next_sibling[0] = TKI_NONE;
    draft->string[0] = TKI_NONE;
    draft->byte[0] = 0;
    return TKI_OK;
}

/* The child of `node` on `byte`, created (in sorted place) if missing. */
static uint32_t draft_child(draft_trie *draft, uint32_t node, uint8_t byte) {
    uint32_t *link = &draft->first_child[node];
    while (*link != TKI_NONE && draft->byte[*link] < byte) {
        link = &draft->next_sibling[*link];
    }
    if (*link != TKI_NONE && draft->byte[*link] == byte) {
        return *link;
    }
    uint32_t child = draft->count++;
    draft->first_child[child] = TKI_NONE;
    draft->next_sibling[child] = *link;
    draft->string[child] = TKI_NONE;
    draft->byte[child] = byte;
    *link = child;
    return child;
}

void tki_special_matcher_free(tki_special_matcher *matcher) {
    if (matcher == NULL) {
        return;
    }
    free(matcher->string_id);
    free(matcher->string_length);
    free(matcher->state_byte);
    free(matcher->first_child);
    free(matcher->child_count);
    free(matcher->failure);
    free(matcher->longest_string);
    free(matcher->string_bytes);
    free(matcher->string_offset);
    free(matcher->sorted);
    free(matcher);
}

/* Byte order of two strings (memcmp, then the shorter first). */
static int compare_bytes(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len) {
    size_t common = a_len < b_len ? a_len : b_len;
    int order = common > 0 ? memcmp(a, b, common) : 0;
    if (order != 0) {
        return order;
    }
    return a_len < b_len ? -1 : a_len > b_len ? 1 : 0;
}

static const uint8_t *string_at(const tki_special_matcher *matcher, uint32_t string) {
    return matcher->string_bytes + matcher->string_offset[string];
}

/* Sorts matcher->sorted by the strings' bytes (insertion into place: few strings, built once). */
static void sort_strings(tki_special_matcher *matcher) {
    uint32_t count = matcher->string_count;
    for (uint32_t i = 0; i < count; i++) {
        matcher->sorted[i] = i;
    }
    /* A shell sort: thousands of strings (o200k_harmony has 1,100) in a few milliseconds at most. */
    for (uint32_t gap = count / 2; gap > 0; gap /= 2) {
        for (uint32_t i = gap; i < count; i++) {
            uint32_t moving = matcher->sorted[i];
            uint32_t j = i;
            while (j >= gap && compare_bytes(string_at(matcher, matcher->sorted[j - gap]),
                                             matcher->string_length[matcher->sorted[j - gap]],
                                             string_at(matcher, moving), matcher->string_length[moving]) > 0) {
                matcher->sorted[j] = matcher->sorted[j - gap];
                j -= gap;
            }
            matcher->sorted[j] = moving;
        }
    }
}

/* Whether data[0..len) (len >= 1) is a proper prefix of some string: binary search in byte order. */
static int proper_prefix_of_some(const tki_special_matcher *matcher, const uint8_t *data, size_t len) {
    uint32_t low = 0, high = matcher->string_count;
    while (low < high) { /* the first string >= data */
        uint32_t middle = low + (high - low) / 2;
        uint32_t string = matcher->sorted[middle];
        if (compare_bytes(string_at(matcher, string), matcher->string_length[string], data, len) < 0) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    /* The strings that start with data follow it in byte order (data itself first, if a string). */
    for (uint32_t k = low; k < matcher->string_count && k <= low + 1; k++) {
        uint32_t string = matcher->sorted[k];
        if (matcher->string_length[string] > len && memcmp(string_at(matcher, string), data, len) == 0) {
            return 1;
        }
    }
    return 0;
}

size_t tki_special_matcher_open_start(const tki_special_matcher *matcher, const uint8_t *data,
                                      size_t data_len, size_t from) {
    if (matcher == NULL || matcher->string_count == 0 || matcher->longest < 2) {
        return data_len;
    }
    size_t lowest = data_len - from >= matcher->longest ? data_len - matcher->longest + 1 : from;
    for (size_t position = lowest; position < data_len; position++) {
        if (matcher->first_byte[data[position]] &&
            proper_prefix_of_some(matcher, data + position, data_len - position)) {
            return position;
        }
    }
    return data_len;
}

uint32_t tki_special_matcher_id(const tki_special_matcher *matcher, uint32_t string) {
    return matcher->string_id[string];
}

size_t tki_special_matcher_length(const tki_special_matcher *matcher, uint32_t string) {
    return matcher->string_length[string];
}

/* The child of `state` on `byte`, or TKI_NONE (binary search: children are sorted). */
static uint32_t child_on(const tki_special_matcher *matcher, uint32_t state, uint8_t byte) {
    uint32_t low = matcher->first_child[state];
    uint32_t high = low + matcher->child_count[state];
    while (low < high) {
        uint32_t middle = low + (high - low) / 2;
        uint8_t here = matcher->state_byte[middle];
        if (here == byte) {
            return middle;
        }
        if (here < byte) {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    return TKI_NONE;
}

/* One automaton step: the state after `byte`, following failure links. */
static uint32_t step(const tki_special_matcher *matcher, uint32_t state, uint8_t byte) {
    for (;;) {
        uint32_t child = child_on(matcher, state, byte);
        if (child != TKI_NONE) {
            return child;
        }
        if (state == 0) {
            return 0;
        }
        state = matcher->failure[state];
    }
}

/*
 * Lays the draft out breadth-first in the matcher and links it: failure
 * links and each state's longest string, in breadth-first order (a state's
 * failure link is shallower, so it is done before the state).
 */
static void lay_out(tki_special_matcher *matcher, const draft_trie *draft, uint32_t *order) {
    uint32_t state_count = draft->count;
    uint32_t tail = 1;
    order[0] = 0;
    for (uint32_t state = 0; state < state_count; state++) {
        uint32_t node = order[state];
        matcher->state_byte[state] = draft->byte[node];
        matcher->longest_string[state] = draft->string[node];
        matcher->first_child[state] = tail;
        for (uint32_t child = draft->first_child[node]; child != TKI_NONE;
             child = draft->next_sibling[child]) {
            order[tail++] = child;
        }
        matcher->child_count[state] = tail - matcher->first_child[state];
    }
    matcher->failure[0] = 0;
    for (uint32_t state = 0; state < state_count; state++) {
        uint32_t first = matcher->first_child[state];
        for (uint32_t child = first; child < first + matcher->child_count[state]; child++) {
            matcher->failure[child] =
                state == 0 ? 0 : step(matcher, matcher->failure[state], matcher->state_byte[child]);
        }
        if (state > 0 && matcher->longest_string[state] == TKI_NONE) {
            matcher->longest_string[state] = matcher->longest_string[matcher->failure[state]];
        }
    }
}

int32_t tki_special_matcher_build(const uint8_t *bytes, const uint64_t *offsets,
                                  const uint32_t *ids, uint32_t count,
                                  tki_special_matcher **out_matcher, uint32_t *error_index) {
    if (out_matcher == NULL || (count > 0 && (bytes == NULL || offsets == NULL))) {
        return TKI_ERR_ARGUMENT;
    }
    *out_matcher = NULL;
    uint32_t ignored_index = 0;
    if (error_index == NULL) {
        error_index = &ignored_index;
    }
    *error_index = 0;
    /* States: at most one per byte, plus the root; they must fit in uint32_t. */
    uint64_t total = 0;
    uint32_t longest = 0;
    for (uint32_t i = 0; i < count; i++) {
        *error_index = i;
        if (offsets[i + 1] < offsets[i]) {
            return TKI_ERR_ARGUMENT;
        }
        uint64_t length = offsets[i + 1] - offsets[i];
        if (length == 0) {
            return TKI_ERR_EMPTY_TOKEN;
        }
        if (length >= UINT32_MAX - 1 - total || length > SIZE_MAX / 16) {
            return TKI_ERR_ARGUMENT;
        }
        total += length;
        longest = length > longest ? (uint32_t)length : longest;
    }
    *error_index = 0;
    size_t capacity = (size_t)total + 1;
    if (capacity > SIZE_MAX / sizeof(uint32_t)) {
        return TKI_ERR_NOMEM;
    }

    int32_t status = TKI_OK;
    draft_trie draft = {0, NULL, NULL, NULL, NULL};
    uint32_t *order = NULL;
    tki_special_matcher *matcher = calloc(1, sizeof(*matcher));
    if (matcher == NULL) {
        status = TKI_ERR_NOMEM;
        goto done;
    }
    matcher->string_count = count;
    matcher->longest = longest;
    matcher->only_first_byte = -1;
    size_t strings = count > 0 ? count : 1;
    matcher->string_id = malloc(strings * sizeof(uint32_t));
    matcher->string_length = malloc(strings * sizeof(uint32_t));
    matcher->string_offset = malloc(strings * sizeof(uint64_t));
    matcher->sorted = malloc(strings * sizeof(uint32_t));
    matcher->string_bytes = malloc(total > 0 ? (size_t)total : 1);
    status = draft_init(&draft, capacity);
    if (matcher->string_id == NULL || matcher->string_length == NULL || matcher->string_offset == NULL ||
        matcher->sorted == NULL || matcher->string_bytes == NULL || status != TKI_OK) {
        status = TKI_ERR_NOMEM;
        goto done;
    }
    uint32_t first_bytes = 0;
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *string = bytes + offsets[i];
        uint32_t length = (uint32_t)(offsets[i + 1] - offsets[i]);
        matcher->string_id[i] = ids != NULL ? ids[i] : i;
        matcher->string_length[i] = length;
        matcher->string_offset[i] = offsets[i] - offsets[0];
        memcpy(matcher->string_bytes + matcher->string_offset[i], string, length);
        uint32_t node = 0;
        for (uint32_t k = length; k > 0; k--) {
            node = draft_child(&draft, node, string[k - 1]);
        }
        if (draft.string[node] != TKI_NONE) {
            *error_index = i;
            status = TKI_ERR_DUPLICATE_BYTES;
            goto done;
        }
        draft.string[node] = i;
        if (!matcher->first_byte[string[0]]) {
            matcher->first_byte[string[0]] = 1;
            matcher->only_first_byte = first_bytes == 0 ? string[0] : -1;
            first_bytes++;
        }
    }
    uint32_t state_count = draft.count;
    matcher->state_count = state_count;
    matcher->state_byte = malloc(state_count);
    matcher->first_child = malloc(state_count * sizeof(uint32_t));
    matcher->child_count = malloc(state_count * sizeof(uint32_t));
    matcher->failure = malloc(state_count * sizeof(uint32_t));
    matcher->longest_string = malloc(state_count * sizeof(uint32_t));
    order = malloc(state_count * sizeof(uint32_t));
    if (matcher->state_byte == NULL || matcher->first_child == NULL ||
        matcher->child_count == NULL || matcher->failure == NULL ||
        matcher->longest_string == NULL || order == NULL) {
        status = TKI_ERR_NOMEM;
        goto done;
    }
    lay_out(matcher, &draft, order);
    sort_strings(matcher);

done:
    free(order);
    draft_free(&draft);
    if (status != TKI_OK) {
        tki_special_matcher_free(matcher);
        return status;
    }
    *out_matcher = matcher;
    return TKI_OK;
}

/* ------------------------------------------------------------------ searching */

/*
 * The search over one text: the window of positions whose longest starting
 * string is known, and the text.
 */
typedef struct special_scanner {
    const tki_special_matcher *matcher;
    const uint8_t *data;
    size_t data_len;
    size_t begin;          /* the window: positions [begin, end) */
    size_t end;
    size_t capacity;       /* positions a window may hold */
    uint32_t *longest_at;  /* by position - begin: the longest string there, or TKI_NONE */
} special_scanner;

static void scanner_init(special_scanner *scanner, const tki_special_matcher *matcher,
                         const uint8_t *data, size_t data_len) {
    scanner->matcher = matcher;
    scanner->data = data;
    scanner->data_len = data_len;
    scanner->begin = 0;
    scanner->end = 0;
    /* Four longest strings wide (so the overlap costs at most a quarter), at least 256. */
    size_t capacity = (size_t)matcher->longest * 4;
    capacity = capacity < 256 ? 256 : capacity;
    scanner->capacity = capacity < data_len ? capacity : data_len;
    scanner->longest_at = NULL; /* allocated at the first candidate: most texts have none */
}

static void scanner_free(special_scanner *scanner) {
    free(scanner->longest_at);
    scanner->longest_at = NULL;
}

/* Makes the window start at `begin`: one backward run of the automaton. */
static int32_t scanner_fill(special_scanner *scanner, size_t begin) {
    const tki_special_matcher *matcher = scanner->matcher;
    if (scanner->longest_at == NULL) {
        if (scanner->capacity > SIZE_MAX / sizeof(uint32_t)) {
            return TKI_ERR_NOMEM;
        }
        scanner->longest_at = malloc(scanner->capacity * sizeof(uint32_t));
        if (scanner->longest_at == NULL) {
            return TKI_ERR_NOMEM;
        }
    }
    size_t data_len = scanner->data_len;
    size_t end = data_len - begin > scanner->capacity ? begin + scanner->capacity : data_len;
    size_t reach = matcher->longest - 1; /* a string starting before `end` ends before end + reach */
    size_t scan_end = data_len - end > reach ? end + reach : data_len;
    uint32_t state = 0;
    for (size_t position = scan_end; position > begin;) {
        position--;
        state = step(matcher, state, scanner->data[position]);
        if (position < end) {
            scanner->longest_at[position - begin] = matcher->longest_string[state];
        }
    }
    scanner->begin = begin;
    scanner->end = end;
    return TKI_OK;
}

/* The first position >= from where some string's first byte is, or data_len. */
static size_t next_candidate(const special_scanner *scanner, size_t from) {
    const tki_special_matcher *matcher = scanner->matcher;
    const uint8_t *data = scanner->data;
    size_t data_len = scanner->data_len;
    if (from >= data_len) {
        return data_len;
    }
    if (matcher->only_first_byte >= 0) {
        const uint8_t *found = memchr(data + from, matcher->only_first_byte, data_len - from);
        return found == NULL ? data_len : (size_t)(found - data);
    }
    while (from < data_len && !matcher->first_byte[data[from]]) {
        from++;
    }
    return from;
}

/*
 * The leftmost occurrence at or after `from` (the longest there): *found = 1
 * with *out_start and *out_string set, or 0 if there is none.
 */
static int32_t scanner_next(special_scanner *scanner, size_t from, int *found, size_t *out_start,
                            uint32_t *out_string) {
    *found = 0;
    if (scanner->matcher->string_count == 0) {
        return TKI_OK;
    }
    for (size_t position = next_candidate(scanner, from); position < scanner->data_len;
         position = next_candidate(scanner, position + 1)) {
        if (position < scanner->begin || position >= scanner->end) {
            int32_t status = scanner_fill(scanner, position);
            if (status != TKI_OK) {
                return status;
            }
        }
        uint32_t string = scanner->longest_at[position - scanner->begin];
        if (string != TKI_NONE) {
            *found = 1;
            *out_start = position;
            *out_string = string;
            return TKI_OK;
        }
    }
    return TKI_OK;
}

int32_t tki_special_matcher_find(const tki_special_matcher *matcher, const uint8_t *data,
                                 size_t data_len, size_t from, size_t *out_starts,
                                 uint32_t *out_strings, size_t capacity, size_t *out_count) {
    if (matcher == NULL || out_count == NULL || (data == NULL && data_len > 0) ||
        (capacity > 0 && (out_starts == NULL || out_strings == NULL))) {
        return TKI_ERR_ARGUMENT;
    }
    *out_count = 0;
    if (from > data_len) {
        return TKI_ERR_ARGUMENT;
    }
    special_scanner scanner;
    scanner_init(&scanner, matcher, data, data_len);
    int32_t status = TKI_OK;
    size_t count = 0;
    size_t start = 0;
    uint32_t string = 0;
    int found = 0;
    while (count < capacity) {
        status = scanner_next(&scanner, from, &found, &start, &string);
        if (status != TKI_OK || !found) {
            break;
        }
        out_starts[count] = start;
        out_strings[count] = string;
        count++;
        from = start + matcher->string_length[string];
    }
    scanner_free(&scanner);
    if (status == TKI_OK) {
        *out_count = count;
    }
    return status;
}

/* ------------------------------------------------------------------ encoding */

/*
 * tiktoken's encode with allowed specials on an engine the caller set up:
 * the strings of `specials` found in data become their ids, and each stretch
 * between them is encoded on its own by the engine (a pattern's end-of-text
 * rules see the stretch's end, as in tiktoken).
 */
int32_t tki_engine_encode_with_specials(tki_engine *engine, const tki_special_matcher *specials,
                                        const uint8_t *data, size_t data_len, uint32_t *out,
                                        size_t out_capacity, size_t *out_count,
                                        size_t *out_last_piece_tokens) {
    if (out_count == NULL || (data == NULL && data_len > 0) || (out == NULL && out_capacity > 0) ||
        out_capacity < data_len) {
        return TKI_ERR_ARGUMENT;
    }
    *out_count = 0;
    static const tki_special_matcher no_specials = {0};
    special_scanner scanner;
    scanner_init(&scanner, specials != NULL ? specials : &no_specials, data, data_len);
    int32_t status = TKI_OK;
    /*
     * Every id covers at least one byte (a special token is never empty), so
     * before position `position` at most `position` ids are written and the
     * rest of out has room for the rest of the text, as the engine needs.
     */
    size_t count = 0, last_piece_tokens = 0, position = 0;
    while (status == TKI_OK) {
        size_t special_start = data_len;
        uint32_t string = TKI_NONE;
        int found = 0;
        status = scanner_next(&scanner, position, &found, &special_start, &string);
        if (status != TKI_OK) {
            break;
        }
        if (special_start > position) {
            size_t before = count, stop = 0, stretch_last = 0;
            if (engine->pattern == TKI_PATTERN_COMPILED) {
                tki_pattern_scan_reset(engine->scan); /* its positions are the stretch's */
            }
            status = tki_engine_encode(engine, data + position, special_start - position, 1, NULL, out,
                                       &count, &stop, &stretch_last);
            if (status != TKI_OK) {
                break;
            }
            tki_ranks_to_ids(engine->vocab, out + before, count - before);
            if (count > before) {
                last_piece_tokens = stretch_last;
            }
        }
        if (!found) {
            break;
        }
        out[count++] = scanner.matcher->string_id[string];
        last_piece_tokens = 0;
        position = special_start + scanner.matcher->string_length[string];
    }
    scanner_free(&scanner);
    if (status == TKI_OK) {
        *out_count = count;
        if (out_last_piece_tokens != NULL) {
            *out_last_piece_tokens = last_piece_tokens;
        }
    }
    return status;
}

int32_t tki_encode_with_specials(const tki_vocab *vocab, int32_t pattern,
                                 const tki_special_matcher *specials, const uint8_t *data,
                                 size_t data_len, uint32_t flags, uint32_t *out,
                                 size_t out_capacity, size_t *out_count,
                                 size_t *out_last_piece_tokens) {
    if (vocab == NULL || out_count == NULL ||
        (pattern != 0 && (pattern < TKI_PATTERN_R50K || pattern > TKI_PATTERN_O200K))) {
        return TKI_ERR_ARGUMENT;
    }
    *out_count = 0;
    tki_engine engine;
    tki_engine_init(&engine, vocab, pattern, flags);
    int32_t status = tki_engine_check(&engine);
    if (status == TKI_OK) {
        status = tki_engine_encode_with_specials(&engine, specials, data, data_len, out, out_capacity, out_count,
                                                 out_last_piece_tokens);
    }
    tki_engine_free(&engine);
    return status;
}

int32_t tki_pattern_encode_with_specials(const tki_vocab *vocab, const tki_pattern *pattern,
                                         const tki_special_matcher *specials, const uint8_t *data,
                                         size_t data_len, uint32_t flags, uint32_t *out,
                                         size_t out_capacity, size_t *out_count,
                                         size_t *out_last_piece_tokens) {
    if (vocab == NULL || pattern == NULL || out_count == NULL) {
        return TKI_ERR_ARGUMENT;
    }
    *out_count = 0;
    tki_pattern_scan scan;
    tki_pattern_scan_reset(&scan);
    tki_engine engine;
    tki_engine_init(&engine, vocab, 0, flags);
    tki_engine_use_compiled(&engine, pattern, &scan);
    int32_t status = tki_engine_check(&engine);
    if (status == TKI_OK) {
        status = tki_engine_encode_with_specials(&engine, specials, data, data_len, out, out_capacity, out_count,
                                                 out_last_piece_tokens);
    }
    tki_engine_free(&engine);
    return status;
}
