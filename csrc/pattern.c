/*
 * pattern.c — custom pre-split patterns: a compiled program (made from a
 * pat_str by tiktoken_inc/_pattern.py), checked and loaded here, and the
 * matcher that splits text with it in time linear in the text.
 *
 * A program is a deterministic automaton over *atoms*, the classes of
 * characters the pattern cannot tell apart.  From a piece start it reads one
 * character at a time; the transition on the character at position i says
 * whether a match of the backtracking engine's choice ends at i (just before
 * that character: this is how one-character lookaheads such as \s+(?!\S) are
 * decided) and which state follows.  The piece ends at the last such
 * position once the automaton dies, or at the end of the text if the state
 * there accepts at the end (`$`, lookaheads that pass at the end).
 *
 * Program layout (little-endian, no padding):
 *   OFFSET  SIZE          DESCRIPTION
 *   0       4             "TKIP"
 *   4       4             version (1)
 *   8       4             A: atoms (1..255)
 *   12      4             S: states (2..TKI_PATTERN_MAX_STATES); 0 is dead, 1 the start
 *   16      4             N: intervals of code points (1..0x110000)
 *   20      4             the atom of an invalid UTF-8 byte
 *   24      4             reserved (0)
 *   28      4N            interval starts: 0 first, ascending, below 0x110000
 *   28+4N   N             the atom of each interval
 *   28+5N   2SA           transitions: [state * A + atom] = next state | TKI_PATTERN_MATCHED
 *   ..      S             1 where a state accepts at the end of the text
 *   ..      4A            a character of each atom (0xFFFFFFFF: none, e.g. surrogates)
 *
 * What the matcher relies on, checked at load (load_check): no empty match; a
 * match from every position whatever follows; and a scan that goes on past
 * its best match only through states that repeat themselves on the
 * characters they read (a *loop*: \s*[\r\n]+ looking for one more newline in
 * a long run of spaces).  The scan skips such a run in one step once it has
 * seen where the run ends (tki_pattern_scan keeps one run per loop state), so
 * every position is read at most once per loop state over a whole split:
 * linear time, however the pieces fall.
 *
 * Input is UTF-8; a byte that starts no valid sequence (or a sequence cut by
 * the end of a final text) is one character of the invalid atom, as in
 * pretokenize.c.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define PROGRAM_HEADER_BYTES 28u
#define PROGRAM_VERSION 1u
#define CODE_POINT_LIMIT 0x110000u
#define BLOCK_BITS 7u
#define BLOCK_SIZE (1u << BLOCK_BITS)
#define BLOCK_COUNT (CODE_POINT_LIMIT >> BLOCK_BITS)
#define NO_REPRESENTATIVE 0xFFFFFFFFu
#define NO_LOOP 0xFFFFu

struct tki_pattern {
    uint32_t atom_count;
    uint32_t state_count;
    uint32_t invalid_atom;
    uint32_t loop_count;          /* states with a loop (<= TKI_PATTERN_MAX_LOOPS)      */
    uint8_t ascii_atom[128];
    uint16_t *block_of;           /* by code point >> BLOCK_BITS: its block              */
    uint8_t *blocks;              /* block_count blocks of BLOCK_SIZE atoms              */
    uint32_t block_count;
    uint16_t *transition;         /* [state * atom_count + atom]                         */
    uint16_t *ascii_transition;   /* [state * 128 + byte]: the same for ASCII, no atom   */
    uint8_t *accept_at_end;       /* by state                                            */
    uint16_t *loop_slot;          /* by state: its slot in a scan's run cache, or NO_LOOP */
    uint32_t *representative;     /* by atom                                             */
    uint8_t *holds_text;          /* by state: every continuation ends the match at or
                                     after the current position (compute_holds_text)     */
    uint16_t *split_table;        /* [state * 256 + byte]: tki_pattern_split's step
                                     (build_split_table)                                 */
    int32_t builtin_body;         /* tki_pattern_use_builtin, or 0                       */
};

static uint32_t read_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint16_t read_u16(const uint8_t *p) {
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint8_t atom_of(const tki_pattern *pattern, uint32_t code_point) {
    return pattern->blocks[(size_t)pattern->block_of[code_point >> BLOCK_BITS] * BLOCK_SIZE +
                           (code_point & (BLOCK_SIZE - 1))];
}

void tki_pattern_free(tki_pattern *pattern) {
    if (pattern == NULL) {
        return;
    }
    free(pattern->block_of);
    free(pattern->blocks);
    free(pattern->transition);
    free(pattern->ascii_transition);
    free(pattern->accept_at_end);
    free(pattern->loop_slot);
    free(pattern->representative);
    free(pattern->holds_text);
    free(pattern->split_table);
    free(pattern);
}

/*
 * The two-stage table from the intervals: each block of BLOCK_SIZE code points
 * gets its atoms, identical blocks stored once (found through a small hash
 * table of block contents).
 */
static int32_t build_blocks(tki_pattern *pattern, const uint8_t *starts, const uint8_t *atoms,
                            uint32_t interval_count) {
    enum { HASH_SLOTS = 16384 }; /* > BLOCK_COUNT: never full */
    uint32_t *slot_block = malloc(HASH_SLOTS * sizeof(uint32_t));
    pattern->block_of = malloc(BLOCK_COUNT * sizeof(uint16_t));
    pattern->blocks = malloc((size_t)BLOCK_COUNT * BLOCK_SIZE);
    int32_t status = TKI_ERR_NOMEM;
    if (slot_block == NULL || pattern->block_of == NULL || pattern->blocks == NULL) {
        goto cleanup;
    }
    for (uint32_t i = 0; i < HASH_SLOTS; i++) {
        slot_block[i] = UINT32_MAX;
    }
    uint32_t interval = 0;
    uint8_t block[BLOCK_SIZE];
    for (uint32_t b = 0; b < BLOCK_COUNT; b++) {
        for (uint32_t i = 0; i < BLOCK_SIZE; i++) {
            uint32_t code_point = b * BLOCK_SIZE + i;
            while (interval + 1 < interval_count && read_u32(starts + 4 * (interval + 1)) <= code_point) {
                interval++;
            }
            block[i] = atoms[interval];
        }
        uint32_t hash = 2166136261u;
        for (uint32_t i = 0; i < BLOCK_SIZE; i++) {
            hash = (hash ^ block[i]) * 16777619u;
        }
        uint32_t slot = hash & (HASH_SLOTS - 1);
        while (slot_block[slot] != UINT32_MAX &&
               memcmp(pattern->blocks + (size_t)slot_block[slot] * BLOCK_SIZE, block, BLOCK_SIZE) != 0) {
            slot = (slot + 1) & (HASH_SLOTS - 1);
        }
        if (slot_block[slot] == UINT32_MAX) {
            slot_block[slot] = pattern->block_count;
            memcpy(pattern->blocks + (size_t)pattern->block_count * BLOCK_SIZE, block, BLOCK_SIZE);
            pattern->block_count++;
        }
        pattern->block_of[b] = (uint16_t)slot_block[slot];
    }
    uint8_t *shrunk = realloc(pattern->blocks, (size_t)pattern->block_count * BLOCK_SIZE);
    if (shrunk != NULL) {
        pattern->blocks = shrunk;
    }
    for (uint32_t c = 0; c < 128; c++) {
        pattern->ascii_atom[c] = atom_of(pattern, c);
    }
    status = TKI_OK;
cleanup:
    free(slot_block);
    return status;
}

/*
 * The properties the matcher relies on (the top of this file); TKI_ERR_ARGUMENT
 * if one fails.  `live` marks the atoms that occur in text (those with a
 * representative).  Work: O(states * atoms).
 */
static int32_t load_check(tki_pattern *pattern, const uint8_t *live) {
    const uint32_t atoms = pattern->atom_count, states = pattern->state_count;
    const uint16_t *row1 = pattern->transition + atoms;
    int32_t status = TKI_ERR_ARGUMENT;
    uint8_t *mark = calloc(states, 1);
    uint32_t *stack = malloc(((size_t)states * atoms + 1) * sizeof(uint32_t));
    uint32_t *edge = malloc((size_t)states * sizeof(uint32_t));
    if (mark == NULL || stack == NULL || edge == NULL) {
        status = TKI_ERR_NOMEM;
        goto cleanup;
    }
    if (pattern->accept_at_end[1]) {
        goto cleanup; /* the empty text would be a match */
    }
    for (uint32_t a = 0; a < atoms; a++) {
        if (row1[a] & TKI_PATTERN_MATCHED) {
            goto cleanup; /* an empty match */
        }
    }
    /* Pending states (no match yet): every step from one goes on or ends a match, and
     * each (but the start) accepts at the end. */
    size_t top = 0;
    stack[top++] = 1;
    mark[1] = 1;
    while (top > 0) {
        uint32_t s = stack[--top];
        if (s != 1 && !pattern->accept_at_end[s]) {
            goto cleanup;
        }
        for (uint32_t a = 0; a < atoms; a++) {
            uint16_t t = pattern->transition[(size_t)s * atoms + a];
            if (!live[a] || (t & TKI_PATTERN_MATCHED)) {
                continue;
            }
            if (t == 0) {
                goto cleanup;
            }
            if (!mark[t]) {
                mark[t] = 1;
                stack[top++] = t;
            }
        }
    }
    /* States reached after a match (mark 2), then no cycle among them through steps that
     * end no match, self-loops aside (colours 3: on the path, 4: done). */
    memset(mark, 0, states);
    top = 0;
    for (size_t k = 0; k < (size_t)states * atoms; k++) {
        uint16_t t = pattern->transition[k];
        uint32_t next = t & TKI_PATTERN_STATE_MASK;
        if ((t & TKI_PATTERN_MATCHED) && next != 0 && !mark[next]) {
            mark[next] = 2;
            stack[top++] = next;
        }
    }
    while (top > 0) {
        uint32_t s = stack[--top];
        for (uint32_t a = 0; a < atoms; a++) {
            uint32_t next = pattern->transition[(size_t)s * atoms + a] & TKI_PATTERN_STATE_MASK;
            if (next != 0 && !mark[next]) {
                mark[next] = 2;
                stack[top++] = next;
            }
        }
    }
    for (uint32_t root = 0; root < states; root++) {
        if (mark[root] != 2) {
            continue;
        }
        top = 0;
        stack[top++] = root;
        edge[root] = 0;
        mark[root] = 3;
        while (top > 0) {
            uint32_t s = stack[top - 1];
            int descended = 0;
            while (edge[s] < atoms && !descended) {
                uint16_t t = pattern->transition[(size_t)s * atoms + edge[s]++];
                uint32_t next = t & TKI_PATTERN_STATE_MASK;
                if ((t & TKI_PATTERN_MATCHED) || next == 0 || next == s) {
                    continue;
                }
                if (mark[next] == 3) {
                    goto cleanup; /* a cycle: a scan could run on without bound */
                }
                if (mark[next] == 2) {
                    mark[next] = 3;
                    edge[next] = 0;
                    stack[top++] = next;
                    descended = 1;
                }
            }
            if (!descended) {
                mark[s] = 4;
                top--;
            }
        }
    }
    /* Loop slots: the states that step to themselves on some atom without a match. */
    for (uint32_t s = 0; s < states; s++) {
        pattern->loop_slot[s] = NO_LOOP;
        for (uint32_t a = 0; s != 0 && a < atoms; a++) {
            if (pattern->transition[(size_t)s * atoms + a] == s) {
                if (pattern->loop_count >= TKI_PATTERN_MAX_LOOPS) {
                    goto cleanup;
                }
                pattern->loop_slot[s] = (uint16_t)pattern->loop_count++;
                break;
            }
        }
    }
    status = TKI_OK;
cleanup:
    free(mark);
    free(stack);
    free(edge);
    return status;
}

/*
 * A state *holds its text* when every continuation of the text read so far
 * ends the match at or after the current position: the end of the text is
 * accepted there, and every character that can come next either ends a match
 * right there or leads to a state that holds its text too.  The largest such
 * set of states (a fixed point, found by striking out states from a worklist
 * over the reversed transitions, O(states x atoms)): a run of letters holds its
 * text whatever comes, since every way out of the loop ends the match where it
 * leaves; a run of spaces before \s+(?!\S) does not (a letter next gives its
 * last space back).  A stream steps an open piece's bytes up to its scan when
 * the scan's state holds its text, else up to the last match end the scan
 * found (tki_pattern_certain_end): no continuation moves either back.
 */
static int32_t compute_holds_text(tki_pattern *pattern, const uint8_t *live) {
    const uint32_t states = pattern->state_count, atoms = pattern->atom_count;
    const size_t edges = (size_t)states * atoms;
    uint8_t *holds = malloc(states);
    uint32_t *first_in = calloc((size_t)states + 1, sizeof(uint32_t)); /* reversed edges, by target */
    uint32_t *sources = malloc(edges * sizeof(uint32_t));
    uint32_t *worklist = malloc((size_t)states * sizeof(uint32_t));
    int32_t status = TKI_ERR_NOMEM;
    if (holds == NULL || first_in == NULL || sources == NULL || worklist == NULL) {
        goto cleanup;
    }
    /* The edges that keep a state's text only if their target does: unflagged, to a live state. */
    for (size_t k = 0; k < edges; k++) {
        uint16_t t = pattern->transition[k];
        if (live[k % atoms] && !(t & TKI_PATTERN_MATCHED)) {
            first_in[(t & TKI_PATTERN_STATE_MASK) + 1]++;
        }
    }
    for (uint32_t s = 0; s < states; s++) {
        first_in[s + 1] += first_in[s];
    }
    for (uint32_t s = 0; s < states; s++) { /* the worklist's room serves as fill cursors first */
        worklist[s] = first_in[s];
    }
    for (size_t k = 0; k < edges; k++) {
        uint16_t t = pattern->transition[k];
        if (live[k % atoms] && !(t & TKI_PATTERN_MATCHED)) {
            sources[worklist[t & TKI_PATTERN_STATE_MASK]++] = (uint32_t)(k / atoms);
        }
    }
    /* Struck out at once: the dead state, states that refuse the end of the text, and states
     * with an unflagged edge to the dead state (the match ends before the current position). */
    size_t pending = 0;
    for (uint32_t s = 0; s < states; s++) {
        int keeps = s != 0 && pattern->accept_at_end[s];
        for (uint32_t a = 0; keeps && a < atoms; a++) {
            uint16_t t = pattern->transition[(size_t)s * atoms + a];
            keeps = !live[a] || (t & TKI_PATTERN_MATCHED) || (t & TKI_PATTERN_STATE_MASK) != 0;
        }
        holds[s] = (uint8_t)keeps;
        if (!keeps) {
            worklist[pending++] = s;
        }
    }
    /* A state with an unflagged edge to a struck-out state is struck out too. */
    while (pending > 0) {
        uint32_t struck = worklist[--pending];
        for (uint32_t k = first_in[struck]; k < first_in[struck + 1]; k++) {
            uint32_t source = sources[k];
            if (holds[source]) {
                holds[source] = 0;
                worklist[pending++] = source;
            }
        }
    }
    pattern->holds_text = holds;
    holds = NULL;
    status = TKI_OK;
cleanup:
    free(holds);
    free(first_in);
    free(sources);
    free(worklist);
    return status;
}

/*
 * The table of tki_pattern_split's steps.  Its rows are the automaton's
 * states twice over, by whether the step into the state ended a match (row
 * 2 * state + 1) or not (row 2 * state), so that a row knows where the best
 * match so far ends when that is just before the byte read last; 256 columns,
 * one per byte.  An entry is the next row, or:
 *   SPLIT_END   the automaton dies after a match that ends just before the
 *               byte: the piece ends there and the next one starts with the
 *               byte (the entry's row is the start state's step on it);
 *   SPLIT_BACK  it dies after a match that ends just before the byte read
 *               last (a space that \s+(?!\S) gives back): the piece ends
 *               there, and the next one starts with that byte;
 *   SPLIT_SLOW  the general matcher (tki_pattern_match) takes the piece from
 *               its start: a byte of a multi-byte character, a step into a
 *               state with a loop (whose runs the scan remembers), or a death
 *               after an earlier match.
 */
#define SPLIT_SLOW 0x8000u
#define SPLIT_END 0x4000u
#define SPLIT_BACK 0x2000u
#define SPLIT_ROW_MASK 0x1FFFu /* (2 * TKI_PATTERN_MAX_STATES rows) */
#define SPLIT_START_ROW 2u     /* state 1, no match */

static int32_t build_split_table(tki_pattern *pattern) {
    const uint32_t rows = 2 * pattern->state_count;
    pattern->split_table = malloc((size_t)rows * 256 * sizeof(uint16_t));
    if (pattern->split_table == NULL) {
        return TKI_ERR_NOMEM;
    }
    for (uint32_t row = 0; row < rows; row++) {
        const uint32_t s = row / 2, entered_by_match = row & 1;
        for (uint32_t byte = 0; byte < 256; byte++) {
            const uint16_t t = byte < 0x80 ? pattern->ascii_transition[(size_t)s * 128 + byte] : 0;
            const uint32_t next = t & TKI_PATTERN_STATE_MASK, matched = (t & TKI_PATTERN_MATCHED) != 0;
            uint16_t step = SPLIT_SLOW;
            if (s == 0 || byte >= 0x80) {
                step = SPLIT_SLOW;
            } else if (next == 0 && matched) {
                /* from the start no step ends a match or dies (load_check) */
                const uint32_t first = pattern->ascii_transition[128 + byte] & TKI_PATTERN_STATE_MASK;
                step = pattern->loop_slot[first] != NO_LOOP ? SPLIT_SLOW : (uint16_t)(SPLIT_END | (2 * first));
            } else if (next == 0) {
                step = entered_by_match ? SPLIT_BACK : SPLIT_SLOW;
            } else if (pattern->loop_slot[next] == NO_LOOP) {
                step = (uint16_t)(2 * next + matched);
            }
            pattern->split_table[(size_t)row * 256 + byte] = step;
        }
    }
    return TKI_OK;
}

size_t tki_pattern_certain_end(const tki_pattern *pattern, const tki_pattern_scan *scan) {
    if (scan->open_start == SIZE_MAX) {
        return 0;
    }
    return pattern->holds_text[scan->open_state] ? scan->open_scanned : scan->open_last;
}

int32_t tki_pattern_load(const uint8_t *program, size_t program_len, tki_pattern **out_pattern) {
    if (out_pattern == NULL || (program == NULL && program_len > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    *out_pattern = NULL;
    if (program_len < PROGRAM_HEADER_BYTES || memcmp(program, "TKIP", 4) != 0 ||
        read_u32(program + 4) != PROGRAM_VERSION) {
        return TKI_ERR_ARGUMENT;
    }
    const uint32_t atoms = read_u32(program + 8), states = read_u32(program + 12);
    const uint32_t intervals = read_u32(program + 16), invalid_atom = read_u32(program + 20);
    if (atoms < 1 || atoms > 255 || states < 2 || states > TKI_PATTERN_MAX_STATES || intervals < 1 ||
        intervals > CODE_POINT_LIMIT || invalid_atom >= atoms || read_u32(program + 24) != 0) {
        return TKI_ERR_ARGUMENT;
    }
    const uint64_t expected = (uint64_t)PROGRAM_HEADER_BYTES + 5u * (uint64_t)intervals +
                              2u * (uint64_t)states * atoms + states + 4u * (uint64_t)atoms;
    if (program_len != expected) {
        return TKI_ERR_ARGUMENT;
    }
    const uint8_t *starts = program + PROGRAM_HEADER_BYTES;
    const uint8_t *interval_atoms = starts + 4u * (size_t)intervals;
    const uint8_t *transitions = interval_atoms + intervals;
    const uint8_t *accepts = transitions + 2u * (size_t)states * atoms;
    const uint8_t *representatives = accepts + states;
    if (read_u32(starts) != 0) {
        return TKI_ERR_ARGUMENT;
    }
    for (uint32_t i = 0; i < intervals; i++) {
        if (interval_atoms[i] >= atoms || read_u32(starts + 4u * i) >= CODE_POINT_LIMIT ||
            (i > 0 && read_u32(starts + 4u * i) <= read_u32(starts + 4u * (i - 1)))) {
            return TKI_ERR_ARGUMENT;
        }
    }
    tki_pattern *pattern = calloc(1, sizeof(*pattern));
    if (pattern == NULL) {
        return TKI_ERR_NOMEM;
    }
    int32_t status = TKI_ERR_NOMEM;
    uint8_t live[256] = {0};
    pattern->atom_count = atoms;
    pattern->state_count = states;
    pattern->invalid_atom = invalid_atom;
    pattern->transition = malloc((size_t)states * atoms * sizeof(uint16_t));
    pattern->ascii_transition = malloc((size_t)states * 128 * sizeof(uint16_t));
    pattern->accept_at_end = malloc(states);
    pattern->loop_slot = malloc((size_t)states * sizeof(uint16_t));
    pattern->representative = malloc((size_t)atoms * sizeof(uint32_t));
    if (pattern->transition == NULL || pattern->ascii_transition == NULL || pattern->accept_at_end == NULL ||
        pattern->loop_slot == NULL || pattern->representative == NULL) {
        goto cleanup;
    }
    status = build_blocks(pattern, starts, interval_atoms, intervals);
    if (status != TKI_OK) {
        goto cleanup;
    }
    status = TKI_ERR_ARGUMENT;
    for (size_t k = 0; k < (size_t)states * atoms; k++) {
        uint16_t t = read_u16(transitions + 2 * k);
        if ((t & TKI_PATTERN_STATE_MASK) >= states || (k < atoms && t != 0)) {
            /* (the dead state stays dead, matching nothing) */
            goto cleanup;
        }
        pattern->transition[k] = t;
    }
    for (uint32_t s = 0; s < states; s++) {
        for (uint32_t byte = 0; byte < 128; byte++) {
            pattern->ascii_transition[(size_t)s * 128 + byte] =
                pattern->transition[(size_t)s * atoms + pattern->ascii_atom[byte]];
        }
        if (accepts[s] > 1 || (s == 0 && accepts[s])) {
            goto cleanup;
        }
        pattern->accept_at_end[s] = accepts[s];
    }
    for (uint32_t a = 0; a < atoms; a++) {
        uint32_t code_point = read_u32(representatives + 4u * a);
        if (code_point != NO_REPRESENTATIVE &&
            (code_point >= CODE_POINT_LIMIT || (code_point >= 0xD800 && code_point < 0xE000) ||
             atom_of(pattern, code_point) != a)) {
            goto cleanup;
        }
        pattern->representative[a] = code_point;
        live[a] = code_point != NO_REPRESENTATIVE;
    }
    if (!live[invalid_atom]) {
        goto cleanup;
    }
    status = load_check(pattern, live);
    if (status == TKI_OK) {
        status = compute_holds_text(pattern, live);
    }
    if (status == TKI_OK) {
        status = build_split_table(pattern);
    }
cleanup:
    if (status != TKI_OK) {
        tki_pattern_free(pattern);
        return status;
    }
    *out_pattern = pattern;
    return TKI_OK;
}

int32_t tki_pattern_use_builtin(tki_pattern *pattern, int32_t builtin) {
    if (pattern == NULL || builtin < 0 || builtin > TKI_PATTERN_O200K) {
        return TKI_ERR_ARGUMENT;
    }
    pattern->builtin_body = builtin;
    return TKI_OK;
}

int32_t tki_pattern_builtin_body(const tki_pattern *pattern) {
    return pattern->builtin_body;
}

uint32_t tki_pattern_atom_count(const tki_pattern *pattern) {
    return pattern != NULL ? pattern->atom_count : 0;
}

int32_t tki_pattern_representatives(const tki_pattern *pattern, uint32_t *out, size_t capacity,
                                    size_t *out_count) {
    if (pattern == NULL || out_count == NULL || (out == NULL && capacity > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    size_t count = 0;
    for (uint32_t a = 0; a < pattern->atom_count; a++) {
        if (pattern->representative[a] == NO_REPRESENTATIVE) {
            continue;
        }
        if (count >= capacity) {
            return TKI_ERR_ARGUMENT;
        }
        out[count++] = pattern->representative[a];
    }
    *out_count = count;
    return TKI_OK;
}

/* ------------------------------------------------------------------ matching */

/*
 * No open scan and no run remembered.  The runs' slots are not cleared: a
 * slot is read only where its bit of run_slots is set, so a reset costs a few
 * stores, not 1 KiB of them (it is made once per call and per stretch between
 * special tokens: two resets were ~450 instructions of a 170-byte document).
 */
void tki_pattern_scan_reset(tki_pattern_scan *scan) {
    scan->open_start = SIZE_MAX;
    scan->open_scanned = 0;
    scan->open_last = 0;
    scan->open_state = 0;
    scan->run_slots = 0;
}

/*
 * The atom of the character at pos (pos < len) and its width.  A sequence cut
 * by the end of the text: with `final`, its first byte is an invalid character;
 * else *width is 0 (more text may complete it).
 */
static inline uint8_t atom_at(const tki_pattern *pattern, const uint8_t *data, size_t len,
                              size_t pos, int final, size_t *width) {
    const uint8_t *s = data + pos;
    const uint8_t b0 = s[0];
    if (b0 < 0x80) {
        *width = 1;
        return pattern->ascii_atom[b0];
    }
    const size_t left = len - pos;
    const size_t needed = b0 < 0xC2 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : b0 < 0xF5 ? 4 : 1;
    *width = 1;
    if (needed == 1) {
        return (uint8_t)pattern->invalid_atom;
    }
    size_t have = left < needed ? left : needed;
    for (size_t i = 1; i < have; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            return (uint8_t)pattern->invalid_atom;
        }
    }
    if (left < needed) {
        if (!final) {
            *width = 0;
        }
        return (uint8_t)pattern->invalid_atom;
    }
    uint32_t code_point;
    if (needed == 2) {
        code_point = ((uint32_t)(b0 & 0x1F) << 6) | (s[1] & 0x3F);
    } else if (needed == 3) {
        code_point = ((uint32_t)(b0 & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        if (code_point < 0x800 || (code_point >= 0xD800 && code_point < 0xE000)) {
            return (uint8_t)pattern->invalid_atom;
        }
    } else {
        code_point = ((uint32_t)(b0 & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                     ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        if (code_point < 0x10000 || code_point >= CODE_POINT_LIMIT) {
            return (uint8_t)pattern->invalid_atom;
        }
    }
    *width = needed;
    return atom_of(pattern, code_point);
}

size_t tki_pattern_match(const tki_pattern *pattern, tki_pattern_scan *scan, const uint8_t *data,
                         size_t len, size_t pos, int final, int *touched_end) {
    const uint32_t atoms = pattern->atom_count;
    const uint16_t *transition = pattern->transition;
    uint32_t state = 1;
    size_t last = pos, at = pos;
    if (scan->open_start == pos && scan->open_scanned >= pos && scan->open_scanned <= len) {
        state = scan->open_state; /* the open piece's scan so far */
        last = scan->open_last;
        at = scan->open_scanned;
    }
    size_t run_start = SIZE_MAX; /* where the current run of a loop began */
    int dead = 0;
    const uint16_t *ascii_transition = pattern->ascii_transition;
    const uint16_t *loop_slot = pattern->loop_slot;
    while (at < len) {
        /* ASCII in a state without a loop (most of real text): a byte, a lookup. */
        if (data[at] < 0x80 && loop_slot[state] == NO_LOOP && run_start == SIZE_MAX) {
            const uint16_t *row = ascii_transition + (size_t)state * 128;
            const uint16_t t = row[data[at]];
            if ((t & TKI_PATTERN_STATE_MASK) == state) {
                /* A step that stays where it is and ends a match each time (spaces under
                 * \s+(?!\S), letters under \p{L}+: no loop to remember), over its ASCII
                 * run at once: its byte repeated eight at a compare, then a compare and a
                 * lookup a byte; the match ends before the last. */
                const uint64_t same_byte = 0x0101010101010101ull * data[at];
                at++;
                while (len - at >= 8) {
                    uint64_t word;
                    memcpy(&word, data + at, 8);
                    if (word != same_byte) {
                        break;
                    }
                    at += 8;
                }
                while (at < len && data[at] < 0x80 && row[data[at]] == t) {
                    at++;
                }
                if (t & TKI_PATTERN_MATCHED) {
                    last = at - 1;
                }
                continue;
            }
            if (t & TKI_PATTERN_MATCHED) {
                last = at;
            }
            state = t & TKI_PATTERN_STATE_MASK;
            if (state == 0) {
                dead = 1;
                break;
            }
            at++;
            continue;
        }
        const uint16_t slot = loop_slot[state];
        if (slot != NO_LOOP && ((scan->run_slots >> slot) & 1u) && scan->run_from[slot] <= at &&
            at < scan->run_to[slot] && scan->run_to[slot] <= len) {
            if (run_start == SIZE_MAX) {
                run_start = at;
            }
            at = scan->run_to[slot]; /* a run seen before: the same state at its end */
            continue;
        }
        size_t width;
        const uint8_t atom = atom_at(pattern, data, len, at, final, &width);
        if (width == 0) {
            break; /* a character cut by the end */
        }
        const uint16_t t = transition[(size_t)state * atoms + atom];
        if (t & TKI_PATTERN_MATCHED) {
            last = at;
        }
        if (t == state) {
            if (run_start == SIZE_MAX) {
                run_start = at;
            }
            /* The run's ASCII bytes at once: a compare and a lookup each. */
            const uint16_t *row = ascii_transition + (size_t)state * 128;
            at += width;
            while (at < len && data[at] < 0x80 && row[data[at]] == state) {
                at++;
            }
            continue;
        } else if (run_start != SIZE_MAX) {
            scan->run_from[slot] = run_start;
            scan->run_to[slot] = at;
            scan->run_slots |= (uint64_t)1 << slot;
            run_start = SIZE_MAX;
        }
        state = t & TKI_PATTERN_STATE_MASK;
        if (state == 0) {
            dead = 1;
            break;
        }
        at += width;
    }
    if (dead) {
        if (touched_end != NULL) {
            *touched_end = 0;
        }
        return last;
    }
    if (run_start != SIZE_MAX) {
        const uint16_t slot = pattern->loop_slot[state];
        scan->run_from[slot] = run_start;
        scan->run_to[slot] = at;
        scan->run_slots |= (uint64_t)1 << slot;
    }
    scan->open_start = pos;
    scan->open_scanned = at;
    scan->open_state = state;
    scan->open_last = last;
    if (touched_end != NULL) {
        *touched_end = 1;
    }
    /* As if the text ended here: a cut character's bytes are invalid characters. */
    for (; at < len; at++) {
        const uint16_t t = transition[(size_t)state * atoms + pattern->invalid_atom];
        if (t & TKI_PATTERN_MATCHED) {
            last = at;
        }
        state = t & TKI_PATTERN_STATE_MASK;
        if (state == 0) {
            return last;
        }
    }
    return pattern->accept_at_end[state] ? len : last;
}

/*
 * Steps data[*at ..) through the table from *row while the steps stay inside
 * a piece; returns the first step that does not (*at at its byte, *row the
 * row it was taken from), or 0 at len.  Four bytes per turn of the loop while
 * four are left: their loads do not wait on the steps.
 */
static TKI_ALWAYS_INLINE uint16_t split_steps(const uint16_t *table, const uint8_t *data, size_t len,
                                              size_t *at_io, uint32_t *row_io) {
    size_t at = *at_io;
    uint32_t row = *row_io;
    uint16_t step = 0;
    for (; len - at >= 4; at += 4) {
        const uint8_t b0 = data[at], b1 = data[at + 1], b2 = data[at + 2], b3 = data[at + 3];
        if ((step = table[(size_t)row << 8 | b0]) >= SPLIT_BACK) {
            goto stopped;
        }
        row = step;
        if ((step = table[(size_t)row << 8 | b1]) >= SPLIT_BACK) {
            at += 1;
            goto stopped;
        }
        row = step;
        if ((step = table[(size_t)row << 8 | b2]) >= SPLIT_BACK) {
            at += 2;
            goto stopped;
        }
        row = step;
        if ((step = table[(size_t)row << 8 | b3]) >= SPLIT_BACK) {
            at += 3;
            goto stopped;
        }
        row = step;
    }
    for (; at < len; at++) {
        if ((step = table[(size_t)row << 8 | data[at]]) >= SPLIT_BACK) {
            goto stopped;
        }
        row = step;
    }
    step = 0;
stopped:
    *at_io = at;
    *row_io = row;
    return step;
}

/*
 * The pieces in a row from pos whose ends do not depend on where the text
 * ends, up to `capacity` of them.  Bytes are stepped through split_table, a
 * lookup each, and the step that ends a piece starts the next one, so a piece
 * of ASCII costs a lookup per byte and a store; anything else (a character of
 * another script, a state with a loop, a match that ends before the byte read
 * last) is the general matcher's, from the piece's start.  The table reads a
 * byte once per piece that holds it or the byte before it; tki_pattern_match
 * reads a piece at most once more, and crosses the loops' runs, which the
 * table never steps, once (the scan's runs): linear time.
 */
size_t tki_pattern_split(const tki_pattern *pattern, tki_pattern_scan *scan, const uint8_t *data, size_t len,
                         size_t pos, size_t *ends, size_t capacity) {
    const uint16_t *table = pattern->split_table;
    size_t count = 0, start = pos, at = pos;
    uint32_t row = SPLIT_START_ROW;
    /* (a piece whose scan is open, a stream's, resumes in tki_pattern_match) */
    while (count < capacity && start != scan->open_start) {
        const uint16_t step = split_steps(table, data, len, &at, &row);
        size_t end;
        if (step == 0) { /* the piece from start reaches len */
            if (row & 1) { /* a match ends before the byte read last: the caller's match resumes here */
                scan->open_start = start;
                scan->open_scanned = at;
                scan->open_state = row / 2;
                scan->open_last = at - 1;
            }
            break;
        } else if (step & SPLIT_SLOW) {
            int touched_end = 0;
            end = tki_pattern_match(pattern, scan, data, len, start, 0, &touched_end);
            if (touched_end) {
                break;
            }
            row = SPLIT_START_ROW;
            at = end;
        } else if (step & SPLIT_END) {
            end = at;
            row = step & SPLIT_ROW_MASK;
            at++;
        } else { /* SPLIT_BACK: the next piece starts with the byte read last */
            end = at - 1;
            row = SPLIT_START_ROW;
            at = end;
        }
        ends[count++] = end;
        start = end;
    }
    return count;
}

int32_t tki_pattern_pretokenize(const tki_pattern *pattern, const uint8_t *data, size_t data_len,
                                size_t *piece_ends, size_t capacity, size_t *out_count) {
    if (pattern == NULL || out_count == NULL || (data == NULL && data_len > 0) ||
        (piece_ends == NULL && capacity > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    tki_pattern_scan scan;
    tki_pattern_scan_reset(&scan);
    size_t count = 0;
    for (size_t pos = 0; pos < data_len;) {
        const size_t found = tki_pattern_split(pattern, &scan, data, data_len, pos, piece_ends + count,
                                               capacity - count);
        if (found > 0) {
            count += found;
            pos = piece_ends[count - 1];
            continue;
        }
        const size_t end = tki_pattern_match(pattern, &scan, data, data_len, pos, 1, NULL);
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

int32_t tki_pattern_encode(const tki_vocab *vocab, const tki_pattern *pattern, const uint8_t *data,
                           size_t data_len, uint32_t flags, uint32_t *out, size_t out_capacity,
                           size_t *out_count, size_t *out_last_piece_tokens) {
    return tki_pattern_encode_with_specials(vocab, pattern, NULL, data, data_len, flags, out, out_capacity,
                                            out_count, out_last_piece_tokens);
}
