/*
 * steps.c — the steps of one piece: theta(i), the last token of the BPE of the
 * piece's first i bytes, for every prefix end i, and the piece's tokens read
 * back from them.
 *
 * The step itself (one byte: the automaton's transition, then the longest
 * locally valid canonical suffix) is in step.h.  This file runs it over a
 * piece in two ways, for every caller (one-shot encoding, streams, bounded
 * calls, prefix passes alike):
 *
 *   - a stepper (tki_stepper): one piece stepped as its bytes come, resumable
 *     between calls, that copies the steps of periodic stretches instead of
 *     running them, keeps only a window of prefix ends when asked to
 *     (streams), and finds the prefix end up to which the tokens are certain
 *     (tki_stepper_certain_end: eager output);
 *   - lanes (tki_step_lanes): up to TKI_STEP_LANES short pieces stepped side by
 *     side, so that the cache misses of their table walks overlap.
 *
 * The BPE of the first i bytes is read backwards: theta(i), then
 * theta(i - |theta(i)|), ... (tki_stepper_read_back).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "step.h"

/* ------------------------------------------------------------------ repeats */

/*
 * Repeats.  For m > t (t the longest token), step m + 1 is a function of the
 * automaton state after m bytes and of last(m - t + 1 .. m) alone.  So if at
 * m and at an earlier m' >= t the state and that window are equal, and the
 * bytes after them agree (piece[m + j] == piece[m' + j]), then the steps after
 * m repeat those after m' exactly: they are copied, not run.  A long run of
 * one character or of a short unit (spaces, "ab", one emoji) is periodic after
 * a few hundred bytes and then costs a copy per byte.
 *
 * Candidates come from a rolling hash of (state, window) kept in a small
 * direct-mapped table; a candidate is checked in full before any copy.  Full
 * checks and restarts cost O(t), and at most one happens per t steps run, so
 * the O(log^2 t) bound per byte holds.
 */
enum { REPEAT_SLOTS = 256 }; /* indexed by the top 8 bits of a mixed key */
#define REPEAT_BASE 0x100000001b3ull

typedef struct repeat_slot {
    uint64_t key;
    uint64_t position; /* m: the window ends at m, the state is after m bytes */
    uint32_t state;
} repeat_slot;

struct tki_repeat_finder {
    uint64_t window;       /* t */
    uint64_t base_power;   /* REPEAT_BASE^window */
    uint64_t hash;         /* of last(m - window + 1 .. m) */
    uint64_t hashed_until; /* m of `hash`, or 0: not started */
    uint64_t next_check;   /* no full check before this m */
    repeat_slot slots[REPEAT_SLOTS];
};

static void repeat_finder_reset(tki_repeat_finder *finder, uint64_t window) {
    finder->window = window;
    finder->base_power = 1;
    for (uint64_t i = 0; i < window; i++) {
        finder->base_power *= REPEAT_BASE;
    }
    finder->hash = 0;
    finder->hashed_until = 0;
    finder->next_check = 0;
    memset(finder->slots, 0, sizeof(finder->slots));
}

static inline uint64_t repeat_key(uint64_t hash, uint32_t state) {
    return hash ^ ((uint64_t)state * 0x9e3779b97f4a7c15ull);
}

/* ------------------------------------------------------------------ the stepper */

/* theta(i) of a stepper, for base <= i <= length. */
static inline uint32_t token_at(const tki_stepper *stepper, uint64_t end) {
    return stepper->last_token[end - stepper->base];
}

/* last(i): the forest id of theta(i), 0 for the empty prefix. */
static inline uint32_t forest_id_at(const tki_stepper *stepper, uint64_t end) {
    return end == 0 ? 0 : stepper->vocab->rule[token_at(stepper, end)].forest_in;
}

/*
 * A step reads the forest ids of at most the last t + 1 prefixes (t the
 * longest token), so the stepper keeps them in a window of FOREST_WINDOW(t)
 * entries that slides (the last t + 1 moved to its front when it is full),
 * not beside every prefix end: a long piece costs 4 bytes per byte (its
 * tokens), not 8.
 */
#define FOREST_WINDOW(t) (16 * ((size_t)(t) + 1))

void tki_stepper_init(tki_stepper *stepper, const struct tki_vocab *vocab, uint32_t flags) {
    memset(stepper, 0, sizeof(*stepper));
    stepper->vocab = vocab;
    stepper->flags = flags;
}

void tki_stepper_free(tki_stepper *stepper) {
    if (stepper->exact != NULL) {
        tki_exact_scratch_free(stepper->exact);
        free(stepper->exact);
        stepper->exact = NULL;
    }
    free(stepper->last_token);
    free(stepper->marks);
    free(stepper->forest);
    free(stepper->finder);
    stepper->last_token = NULL;
    stepper->marks = NULL;
    stepper->forest = NULL;
    stepper->finder = NULL;
    stepper->capacity = 0;
    stepper->marks_capacity = 0;
    stepper->forest_capacity = 0;
}

void tki_stepper_reset(tki_stepper *stepper) {
    stepper->state = 0;
    stepper->length = 0;
    stepper->base = 0;
    stepper->forest_base = 0;
    stepper->copied_period = 0;
    stepper->copied_from = stepper->copied_to = 0;
    stepper->copying_period = 0;
    stepper->forest_stale = 0;
    stepper->finder_ready = 0;
    stepper->watched = 0;
    memset(stepper->certain_phases, 0, sizeof(stepper->certain_phases));
    if (stepper->capacity > 0) {
        stepper->last_token[0] = TKI_NONE;
        stepper->forest[0] = 0;
    }
}

/*
 * Room for prefix ends up to `through`.  Grows last_token (doubling; huge
 * pages for long pieces) and makes the forest window.  On failure nothing is
 * changed and TKI_ERR_NOMEM is returned.
 */
int32_t tki_stepper_reserve(tki_stepper *stepper, uint64_t through) {
    uint64_t needed = through - stepper->base + 1;
    if (stepper->forest == NULL) {
        size_t window = FOREST_WINDOW(stepper->vocab->max_token_bytes);
        uint32_t *forest = malloc(window * sizeof(uint32_t));
        if (forest == NULL) {
            return TKI_ERR_NOMEM;
        }
        forest[0] = 0;
        stepper->forest = forest;
        stepper->forest_capacity = window;
    }
    if (needed <= stepper->capacity) {
        return TKI_OK;
    }
    if (needed > SIZE_MAX / sizeof(uint32_t) / 2) {
        return TKI_ERR_NOMEM;
    }
    size_t capacity = stepper->capacity * 2 > needed ? stepper->capacity * 2 : (size_t)needed;
    if (capacity < 256) {
        capacity = 256;
    }
    uint32_t *tokens = tki_table_alloc(capacity * sizeof(uint32_t)); /* huge pages when long */
    if (tokens == NULL) {
        return TKI_ERR_NOMEM;
    }
    if (stepper->capacity > 0) {
        memcpy(tokens, stepper->last_token, (size_t)(stepper->length - stepper->base + 1) * sizeof(uint32_t));
    } else {
        tokens[0] = TKI_NONE;
    }
    free(stepper->last_token);
    stepper->last_token = tokens;
    stepper->capacity = capacity;
    return TKI_OK;
}

/*
 * Drops the prefix ends below keep_from (keep_from <= length): a stream keeps
 * only those a step, a copy or its output may still read.  Moves the kept
 * ends to the front when that frees at least half of the array.
 */
void tki_stepper_forget_before(tki_stepper *stepper, uint64_t keep_from) {
    if (keep_from <= stepper->base || keep_from > stepper->length) {
        return;
    }
    size_t shift = (size_t)(keep_from - stepper->base);
    if (shift * 2 < stepper->capacity) {
        return;
    }
    size_t kept = (size_t)(stepper->length - keep_from + 1);
    memmove(stepper->last_token, stepper->last_token + shift, kept * sizeof(uint32_t));
    stepper->base = keep_from;
}

/* The forest window again from the tokens: last(m - t .. m) (after a copy or a resume). */
static void refill_forest(tki_stepper *stepper, uint64_t m) {
    uint64_t t = stepper->vocab->max_token_bytes;
    uint64_t from = m > t ? m - t : 0;
    if (from < stepper->base) {
        from = stepper->base;
    }
    stepper->forest_base = from;
    for (uint64_t j = from; j <= m; j++) {
        stepper->forest[j - from] = forest_id_at(stepper, j);
    }
}

/* The window hash at m (m >= window), computed whole. */
static uint64_t window_hash(const tki_stepper *stepper, uint64_t window, uint64_t m) {
    uint64_t hash = 0;
    for (uint64_t j = m - window + 1; j <= m; j++) {
        hash = hash * REPEAT_BASE + stepper->forest[j - stepper->forest_base];
    }
    return hash;
}

/* Whether last(m - window + 1 .. m) equals the same ids ending at an earlier m'. */
static int windows_equal(const tki_stepper *stepper, uint64_t window, uint64_t m, uint64_t earlier) {
    for (uint64_t j = 0; j < window; j++) {
        if (stepper->forest[m - window + 1 + j - stepper->forest_base] !=
            forest_id_at(stepper, earlier - window + 1 + j)) {
            return 0;
        }
    }
    return 1;
}

/*
 * After step m (state after m bytes): records m, and returns an earlier m'
 * whose steps the following ones repeat (checked in full), or 0 if none.  A
 * candidate's window must still be kept (m' - window + 1 > base).
 */
static uint64_t repeat_find(tki_stepper *stepper, uint64_t m) {
    tki_repeat_finder *finder = stepper->finder;
    uint64_t window = finder->window;
    if (m < window || m - window < stepper->forest_base) {
        return 0;
    }
    const uint32_t *forest = stepper->forest;
    uint64_t base = stepper->forest_base;
    if (finder->hashed_until + 1 == m && finder->hashed_until != 0) {
        finder->hash = finder->hash * REPEAT_BASE + forest[m - base] -
                       finder->base_power * forest[m - window - base];
    } else {
        finder->hash = window_hash(stepper, window, m); /* O(t): a (re)start */
        finder->next_check = m + window;
    }
    finder->hashed_until = m;
    uint32_t state = stepper->state;
    uint64_t key = repeat_key(finder->hash, state);
    repeat_slot *slot = &finder->slots[(key * 0xff51afd7ed558ccdull) >> 56]; /* top bits mix best */
    uint64_t earlier = 0;
    if (slot->key == key && slot->state == state && slot->position >= window &&
        slot->position - window >= stepper->base && slot->position < m && m >= finder->next_check) {
        uint64_t candidate = slot->position;
        finder->next_check = m + window;
        if (windows_equal(stepper, window, m, candidate)) {
            earlier = candidate;
        }
    }
    slot->key = key;
    slot->position = m;
    slot->state = state;
    return earlier;
}

/* The automaton state after piece[0..m): the last t bytes decide it (bytes[i - from] is byte i). */
static uint32_t state_after(const struct tki_vocab *vocab, const uint8_t *bytes, uint64_t from,
                            uint64_t m) {
    uint64_t window = vocab->max_token_bytes;
    uint32_t state = 0;
    for (uint64_t i = m > window ? m - window : 0; i < m; i++) {
        state = tki_automaton_next(vocab, state, bytes[i - from]);
    }
    return state;
}

/*
 * The automaton state after piece[0..m) at the end of a copy of period p that
 * began at `start`, where the state was `start_state`.  The states repeat with
 * the bytes: the state at start is the state p before it (the repeat finder
 * matched them; a copy that goes on in the next call began as such a copy),
 * and each byte of the copy is the byte p before it, so the state at m is the
 * state at start + (m - start) mod p.  A walk of that many bytes from start
 * (no more than t: else state_after's t bytes) instead of t bytes after every
 * copy: a run fed in chunks copies in every call.
 */
static uint32_t state_after_copy(const struct tki_vocab *vocab, const uint8_t *bytes, uint64_t from,
                                 uint64_t start, uint32_t start_state, uint64_t period, uint64_t m) {
    uint64_t phase = (m - start) % period;
    if (phase > vocab->max_token_bytes) {
        return state_after(vocab, bytes, from, m);
    }
    uint32_t state = start_state;
    for (uint64_t i = start; i < start + phase; i++) {
        state = tki_automaton_next(vocab, state, bytes[i - from]);
    }
    return state;
}

/* The exact step's scratch, allocated (*out stays NULL on failure). */
static int32_t new_exact_scratch(const struct tki_vocab *vocab, tki_exact_scratch **out) {
    tki_exact_scratch *scratch = malloc(sizeof(*scratch));
    if (scratch == NULL) {
        return TKI_ERR_NOMEM;
    }
    int32_t status = tki_exact_scratch_init(scratch, vocab);
    if (status != TKI_OK) {
        free(scratch);
        return status;
    }
    *out = scratch;
    return TKI_OK;
}

int32_t tki_stepper_run(tki_stepper *stepper, const uint8_t *bytes, uint64_t bytes_from,
                        uint64_t end) {
    const struct tki_vocab *vocab = stepper->vocab;
    if (end <= stepper->length) {
        return TKI_OK;
    }
    if (bytes_from > stepper->base) {
        return TKI_ERR_INTERNAL; /* the caller must keep the bytes a copy compares */
    }
    int32_t status = tki_stepper_reserve(stepper, end);
    if (status != TKI_OK) {
        return status;
    }
    uint64_t t = vocab->max_token_bytes;
    uint32_t flags = stepper->flags;
    int watching = vocab->watched_count > 0;
    /* Repeats are looked for once a piece is longer than 4t: the lanes step shorter ones. */
    int find_repeats = (flags & TKI_METHOD_LINEAR) == 0 && end > 4 * t;
    if (find_repeats && stepper->finder == NULL) {
        stepper->finder = malloc(sizeof(tki_repeat_finder));
        if (stepper->finder == NULL) {
            return TKI_ERR_NOMEM;
        }
        stepper->finder_ready = 0;
    }
    if (find_repeats && !stepper->finder_ready) {
        repeat_finder_reset(stepper->finder, t);
        stepper->finder_ready = 1;
    }
    uint32_t *forest = stepper->forest;
    uint32_t *last_token = stepper->last_token; /* last_token[i - token_base] is theta(i) */
    uint64_t token_base = stepper->base;
    uint64_t capacity = stepper->forest_capacity, base = stepper->forest_base;
    uint32_t state = stepper->state;
    if (stepper->copying_period != 0) {
        /* A copy that the end of the last call's bytes stopped goes on while the bytes repeat:
         * a long run fed in chunks copies across them, as it would in one call. */
        uint64_t period = stepper->copying_period, m = stepper->length, start = m;
        stepper->copying_period = 0;
        if (find_repeats && m >= bytes_from + period && m + 1 >= token_base + period) {
            while (m < end && bytes[m - bytes_from] == bytes[m - period - bytes_from]) {
                last_token[m + 1 - token_base] = last_token[m + 1 - period - token_base];
                m++;
            }
        }
        if (m > start) {
            if (stepper->copied_period == period && stepper->copied_to == start) {
                stepper->copied_to = m; /* the same stretch, longer */
            } else if (stepper->copied_period == 0 || stepper->copied_to < token_base + period ||
                       m - start > stepper->copied_to + 1 - stepper->copied_from) {
                stepper->copied_from = start + 1;
                stepper->copied_to = m;
                stepper->copied_period = period;
            }
            state = state_after_copy(vocab, bytes, bytes_from, start, state, period, m);
            stepper->length = m;
            stepper->forest_stale = 1; /* refilled below if a step follows */
            if (m == end) {
                stepper->copying_period = period;
            }
        }
    }
    if (stepper->forest_stale && stepper->length < end) {
        refill_forest(stepper, stepper->length); /* last(length - t .. length), from the tokens */
        base = stepper->forest_base;
        stepper->forest_stale = 0;
    }
    for (uint64_t i = stepper->length; i < end; i++) {
        uint64_t length = i + 1;
        if (length - base >= capacity) { /* full: keep last(length - 1 - t .. length - 1) */
            uint64_t keep_from = length - 1 - t;
            memmove(forest, forest + (keep_from - base), (size_t)(t + 1) * sizeof(uint32_t));
            base = keep_from;
        }
        state = tki_automaton_next(vocab, state, bytes[i - bytes_from]);
        tki_prefetch_after_row(vocab, state);
        uint32_t tau = tki_state_tau(vocab, state);
        uint32_t theta = tki_step_theta(vocab, tau, state, forest, (size_t)(length - base), length,
                                        flags);
        if (watching && (stepper->watched || tki_state_watched(vocab, state))) {
            /* A watched token ended in the piece: exact steps from here (exact_step.c). */
            if (stepper->exact == NULL) {
                status = new_exact_scratch(vocab, &stepper->exact);
                if (status != TKI_OK) {
                    return status;
                }
            }
            stepper->watched = 1;
            theta = tki_exact_theta(vocab, stepper->exact, tau, theta,
                                    last_token + (length - token_base), length);
        }
        if (theta == TKI_NONE) {
            return TKI_ERR_INTERNAL; /* the stepper is left unusable: its owner fails */
        }
        forest[length - base] = vocab->rule[theta].forest_in;
        last_token[length - token_base] = theta;
        if (!find_repeats) {
            continue;
        }
        stepper->state = state;
        stepper->forest_base = base;
        uint64_t earlier = repeat_find(stepper, length);
        if (earlier == 0) {
            continue;
        }
        /* Copy while the bytes repeat; then go on stepping from the state there. */
        uint64_t period = length - earlier, m = length;
        while (m < end && bytes[m - bytes_from] == bytes[m - period - bytes_from]) {
            last_token[m + 1 - token_base] = last_token[m + 1 - period - token_base];
            m++;
        }
        if (m > length) {
            if (stepper->copied_period == 0 || stepper->copied_to < token_base + period ||
                m - length > stepper->copied_to + 1 - stepper->copied_from) {
                stepper->copied_from = length + 1;
                stepper->copied_to = m;
                stepper->copied_period = period;
            }
            i = m - 1;
            state = state_after_copy(vocab, bytes, bytes_from, length, state, period, m);
            stepper->length = m;
            if (m == end) {
                /* The next call goes on copying; the forest window is refilled only if it steps. */
                stepper->copying_period = period;
                stepper->forest_stale = 1;
            } else {
                refill_forest(stepper, m); /* last(m - t .. m), from the tokens */
                base = stepper->forest_base;
            }
        }
    }
    stepper->state = state;
    stepper->length = end;
    stepper->forest_base = base;
    return TKI_OK;
}

/* ------------------------------------------------------------------ reading back */

/*
 * The tokens of a piece are read backwards from an end: theta(end), then
 * theta(end - |theta(end)|), ...: a chain of dependent loads, one per token.
 * Where the stepper copied steps with period p (theta(m) equal to
 * theta(m - p) for m in [from, to]), the chain read from a position e is the
 * chain read from e - q p shifted, so once the chain meets the phase
 * (e mod p) of an earlier position e' of the stretch again, the tokens read
 * from e' down to e repeat, as a block, for as long as the positions they
 * read stay in the stretch: for a block of span D = e' - e at position e,
 * e - D + 1 + p >= from and e + D <= to.  A megabyte of one emoji is then a
 * few blocks copied, not a chain of a million loads.
 */
enum { PHASE_SLOTS = 64, READ_AHEAD = 256 };

/* Reverses out[0..count). */
static void reverse_ids(uint32_t *out, size_t count) {
    for (size_t i = 0; i < count / 2; i++) {
        uint32_t swap = out[i];
        out[i] = out[count - 1 - i];
        out[count - 1 - i] = swap;
    }
}

/*
 * How many times the chain read back from `end` repeats the span before it:
 * each repeat needs end >= stop + span (it stays above stop), end + 1 + period
 * >= from + span and end + span <= to (both ends inside the copied stretch),
 * end falling by span each time.
 */
static uint64_t repeats_within(uint64_t end, uint64_t span, uint64_t stop, uint64_t from, uint64_t to,
                               uint64_t period) {
    if (end + span > to) {
        return 0;
    }
    uint64_t lowest = stop + span;
    if (from + span > 1 + period && from + span - 1 - period > lowest) {
        lowest = from + span - 1 - period;
    }
    return end >= lowest ? (end - lowest) / span + 1 : 0;
}

/*
 * out[0 .. total) = the block out[-block .. 0) repeated: copies that double
 * (a run's tokens repeat one or two at a time, and a call per repeat was a
 * call per token).
 */
static void repeat_block(uint32_t *out, size_t block, size_t total) {
    uint32_t *periodic = out - block; /* periodic[0 .. have) repeats the block */
    size_t have = block, target = block + total;
    while (have < target) {
        size_t more = target - have < have ? target - have : have;
        memcpy(periodic + have, periodic, more * sizeof(uint32_t));
        have += more;
    }
}

size_t tki_read_back(const struct tki_vocab *vocab, const uint32_t *last_token, uint64_t base,
                     uint64_t end, uint64_t stop, uint64_t copied_from, uint64_t copied_to,
                     uint64_t copied_period, uint32_t *out) {
    /* last_token[i - base] is theta(i); the loads READ_AHEAD ends below are started early. */
#define THETA_AT(i) last_token[(i) - base]
#define PREFETCH_BELOW(i) TKI_PREFETCH(&last_token[(i) > base + READ_AHEAD ? (i) - READ_AHEAD - base : 0])
    size_t count = 0;
    if (copied_period != 0 && copied_to > stop) {
        uint64_t from = copied_from, to = copied_to, period = copied_period;
        uint64_t phase_end[PHASE_SLOTS] = {0}; /* a position of the stretch the chain met, by phase */
        size_t phase_count[PHASE_SLOTS];        /* the tokens read before it                         */
        while (end > stop) {
            if (end >= from && end <= to) {
                size_t slot = (size_t)((end % period) % PHASE_SLOTS);
                uint64_t earlier = phase_end[slot];
                if (earlier > end && (earlier - end) % period == 0) {
                    uint64_t span = earlier - end;
                    size_t block = count - phase_count[slot];
                    uint64_t repeats = repeats_within(end, span, stop, from, to, period);
                    repeat_block(out + count, block, (size_t)repeats * block);
                    count += (size_t)repeats * block;
                    end -= repeats * span;
                }
                phase_end[slot] = end;
                phase_count[slot] = count;
                if (end <= stop) {
                    break;
                }
            }
            PREFETCH_BELOW(end);
            uint32_t token = THETA_AT(end);
            uint32_t length = vocab->rule[token].length;
            if (length > end - stop) {
                return SIZE_MAX; /* the chain does not pass through stop */
            }
            out[count++] = token;
            end -= length;
        }
    } else if (end - stop > READ_AHEAD) {
        while (end > stop) {
            /* Each load's address waits on the one before: start the loads of the
             * lines ahead (downwards) early, so a long piece is not a chain of misses. */
            PREFETCH_BELOW(end);
            uint32_t token = THETA_AT(end);
            uint32_t length = vocab->rule[token].length;
            if (length > end - stop) {
                return SIZE_MAX;
            }
            out[count++] = token;
            end -= length;
        }
    } else { /* a short piece's steps are in a few lines, just written */
        while (end > stop) {
            uint32_t token = THETA_AT(end);
            uint32_t length = vocab->rule[token].length;
            if (length > end - stop) {
                return SIZE_MAX;
            }
            out[count++] = token;
            end -= length;
        }
    }
#undef THETA_AT
#undef PREFETCH_BELOW
    reverse_ids(out, count);
    return count;
}

size_t tki_stepper_read_back(const tki_stepper *stepper, uint64_t end, uint64_t stop, uint32_t *out) {
    if (end > stepper->length || stop < stepper->base || stop > end) {
        return SIZE_MAX;
    }
    uint64_t from = stepper->copied_from, to = stepper->copied_to, period = stepper->copied_period;
    if (period != 0 && from < stepper->base + period) { /* the stretch lost its first period */
        from = stepper->base + period;
        if (from > to) {
            period = 0;
        }
    }
    return tki_read_back(stepper->vocab, stepper->last_token, stepper->base, end, stop, from, to,
                         period, out);
}

/*
 * Eager output.  With d the depth of the automaton state after n bytes, any
 * token that will ever cover byte n - 1 starts in the last d bytes, so the
 * BPE of every continuation passes through one of the prefix ends in
 * [n - d, n].  The ends form a tree (the parent of end i is i - |theta(i)|),
 * and the tokens on the path from the root to the lowest common ancestor L
 * of those ends are in every continuation's BPE: they are certain.  L is
 * found by following the parents from the top, merging paths that meet, until
 * one is left: O(n - L), the unresolved window (a few hundred bytes at most on
 * the OpenAI vocabularies), per call.  `emitted` is a certain end found before
 * (every path passes through it).
 *
 * In a copied stretch (theta(m) == theta(m - p) for from <= m <= to) the walk
 * from n is the walk from n - q p moved q p on, when both start at states of
 * the same depth and every end the earlier walk read, moved by p, is in the
 * stretch (its certain end plus p >= from, n <= to): the parents there are
 * the parents q p before, moved.  So a long run fed in chunks walks once per
 * phase of the period, not once per chunk (the walk read a few hundred ends).
 */
int32_t tki_stepper_certain_end(tki_stepper *stepper, uint64_t emitted, uint64_t *out_end) {
    const struct tki_vocab *vocab = stepper->vocab;
    uint64_t n = stepper->length;
    uint64_t depth = tki_state_depth(vocab, stepper->state);
    uint64_t window_start = n - (depth < n ? depth : n);
    *out_end = emitted;
    if (window_start <= emitted) {
        return TKI_OK; /* the last certain end is itself in the window */
    }
    if (emitted < stepper->base) {
        return TKI_ERR_INTERNAL;
    }
    uint64_t period = stepper->copied_period;
    tki_certain_phase *phase = NULL;
    if (period != 0) {
        phase = &stepper->certain_phases[(n % period) % TKI_CERTAIN_PHASES];
        if (phase->end != 0 && phase->end < n && phase->period == period && phase->depth == depth &&
            (n - phase->end) % period == 0 && phase->certain + period >= stepper->copied_from &&
            n <= stepper->copied_to && phase->certain + (n - phase->end) >= emitted) {
            phase->certain += n - phase->end;
            phase->end = n;
            *out_end = phase->certain;
            return TKI_OK;
        }
    }
    /* marks[n - i]: a path below the window reached i.  They are grown as the walk
     * goes down (it reads n - L + 1 ends, not the n - emitted + 1 it may read): the
     * first call after a long feed does not clear a mark for every byte fed. */
    uint8_t *marks = stepper->marks;
    size_t capacity = stepper->marks_capacity;
    uint64_t heads = n - window_start + 1;
    uint64_t end = n;
    for (;; end--) {
        if (end < window_start && (n - end >= capacity || !marks[n - end])) {
            continue;
        }
        if (n - end < capacity) {
            marks[n - end] = 0;
        }
        if (heads == 1) {
            break; /* the one path left: every candidate's path passes through `end` */
        }
        uint64_t parent = end - vocab->rule[token_at(stepper, end)].length;
        if (end == emitted || parent < emitted) {
            /* A path that skips the last certain end: the tables are inconsistent. */
            if (capacity > 0) {
                memset(marks, 0, capacity);
            }
            return TKI_ERR_INTERNAL;
        }
        if (parent >= window_start) {
            heads--; /* two paths meet */
            continue;
        }
        if (n - parent >= capacity) { /* (n - parent <= n - emitted) */
            size_t grown = 2 * capacity > (size_t)(n - parent) + 256 ? 2 * capacity : (size_t)(n - parent) + 256;
            uint8_t *more = realloc(marks, grown);
            if (more == NULL) {
                if (capacity > 0) {
                    memset(marks, 0, capacity);
                }
                return TKI_ERR_NOMEM;
            }
            memset(more + capacity, 0, grown - capacity);
            stepper->marks = marks = more;
            stepper->marks_capacity = capacity = grown;
        }
        if (marks[n - parent]) {
            heads--;
        } else {
            marks[n - parent] = 1;
        }
    }
    *out_end = end; /* no mark is left: each path was followed down to `end` */
    if (phase != NULL) {
        phase->end = n;
        phase->certain = end;
        phase->period = period;
        phase->depth = (uint32_t)depth;
    }
    return TKI_OK;
}

/* ------------------------------------------------------------------ lanes */

/*
 * Short pieces stepped side by side.  One piece's steps form a chain of
 * dependent table loads (state -> tile row -> next state -> rule), each a
 * likely cache miss on real text; the pieces of a batch are independent, so
 * stepping several of them in the same loop lets their misses overlap.
 *
 * The automaton's walk does not depend on the decisions, so it goes first,
 * for all lanes side by side: a chain of two loads per byte (row, then tile),
 * the lanes' chains overlapping, with each byte's longest canonical suffix
 * (tau) parked in last_token and its rule prefetched, and the state in
 * last_forest_id (whose entry there the decision overwrites; a search reads
 * tau's suffix parent from the state's row, a line read recently).  The
 * decisions then run lane by lane, their rules already loaded, and their
 * branches no longer hold up the walk.
 */
/*
 * One byte of a lane's walk: the transition, the prefetches, and tau and the
 * state parked at the byte's prefix end.
 */
static TKI_ALWAYS_INLINE uint32_t walk_byte(const struct tki_vocab *vocab, uint32_t state,
                                            uint8_t byte, uint32_t *token_at, uint32_t *state_at,
                                            uint32_t *watched, const int watching) {
    state = tki_automaton_next(vocab, state, byte);
    tki_prefetch_after_row(vocab, state);
    uint32_t tau = tki_state_tau(vocab, state);
    *token_at = tau; /* read from the row the next byte reads */
    *state_at = state; /* until the decision there */
    TKI_PREFETCH(&vocab->rule[tau]);
    if (watching) {
        *watched |= tki_state_watched(vocab, state);
    }
    return state;
}

/*
 * The walk of lanes sorted longest first: tau and the state parked per byte.
 * With `watching` (a constant: each value gets its own copy of the loop, so a
 * vocabulary with no watched token pays nothing), watched_lane[k] gets the
 * watched bytes of lane k's rows, ORed, read from the row the walk reads.
 * The lanes' bytes go round-robin, one stretch per number of lanes still
 * walking (no test of each lane's end at each byte), and the longest lane's
 * tail, which it walks alone (on real text most pieces of a batch are much
 * shorter than its longest), runs in a loop of its own with its state in a
 * register.  In the round-robin a lane's state is read back from the entry
 * where its byte before parked it (entry 0: the root), not kept beside it: a
 * store a byte fewer.
 */
static TKI_ALWAYS_INLINE void walk_lanes(const struct tki_vocab *vocab, const tki_step_lane *lanes,
                                         const uint8_t *order, size_t lane_count,
                                         uint32_t *watched_lane, const int watching) {
    const uint8_t *piece[TKI_STEP_LANES];
    uint32_t *token_at[TKI_STEP_LANES], *state_at[TKI_STEP_LANES];
    uint32_t watched[TKI_STEP_LANES];
    size_t len[TKI_STEP_LANES];
    for (size_t k = 0; k < lane_count; k++) { /* k-th longest */
        const tki_step_lane *lane = &lanes[order[k]];
        piece[k] = lane->piece;
        len[k] = lane->len;
        token_at[k] = lane->last_token + 1; /* byte i's end is entry i + 1 */
        state_at[k] = lane->last_forest_id + 1;
        state_at[k][-1] = 0; /* the root, before the first byte */
        watched[k] = 0;
    }
    size_t live = lane_count, i = 0;
    while (live > 1) {
        for (size_t until = len[live - 1]; i < until; i++) {
            for (size_t k = 0; k < live; k++) {
                walk_byte(vocab, state_at[k][(ptrdiff_t)i - 1], piece[k][i], &token_at[k][i], &state_at[k][i],
                          &watched[k], watching);
            }
        }
        live--;
    }
    if (live == 1) {
        uint32_t alone = state_at[0][(ptrdiff_t)i - 1];
        const uint8_t *bytes = piece[0];
        uint32_t *tokens = token_at[0], *states = state_at[0];
        for (size_t until = len[0]; i < until; i++) {
            alone = walk_byte(vocab, alone, bytes[i], &tokens[i], &states[i], &watched[0], watching);
        }
    }
    if (watching) {
        for (size_t k = 0; k < lane_count; k++) {
            watched_lane[order[k]] = watched[k];
        }
    }
}

/*
 * The decisions of one walked lane.  With `watched` (a constant, as above):
 * from the first byte whose row is watched on, the steps are exact
 * (exact_step.c; its scratch made in *exact when first needed).
 */
static TKI_ALWAYS_INLINE int32_t decide_lane(const struct tki_vocab *vocab, tki_step_lane *lane,
                                             uint32_t flags, tki_exact_scratch **exact,
                                             const int watched) {
    uint32_t *last_forest_id = lane->last_forest_id;
    uint32_t *last_token = lane->last_token;
    size_t len = lane->len; /* (the stores below may alias the lane, as far as C knows) */
    last_forest_id[0] = 0;
    last_token[0] = TKI_NONE;
    int exact_from_here = 0;
    for (size_t length = 1; length <= len; length++) {
        uint32_t tau = last_token[length];
        if (!watched) {
            /* tki_step_theta's fast path, where theta is tau, already parked: only
             * its forest id is written.  Its three tests are taken together, with no
             * branch between them: whether tau is atomic changes from byte to byte
             * of text outside ASCII, and as a branch it was mispredicted on about
             * one byte in three of Chinese text.  An atomic tau passes whatever w
             * is; w is then entry `length` itself (the state parked there), which
             * exists. */
            const tki_token_rule *rule = &vocab->rule[tau];
            uint32_t w = last_forest_id[length - rule->suc_length];
            uint32_t whole = rule->length == length, atomic = rule->suc_length == 0;
            uint32_t inside = (uint32_t)(rule->valid_lo <= w) & (uint32_t)(w < rule->valid_hi);
            if (whole | atomic | inside) {
                last_forest_id[length] = rule->forest_in;
                continue;
            }
        }
        uint32_t state = last_forest_id[length];
        uint32_t theta = watched ? tki_step_theta(vocab, tau, state, last_forest_id, length, length, flags)
                                 : tki_step_search(vocab, tau, tki_state_tau_parent(vocab, state),
                                                   last_forest_id, length, flags);
        if (watched && (exact_from_here || tki_state_watched(vocab, state))) {
            if (*exact == NULL) {
                int32_t status = new_exact_scratch(vocab, exact);
                if (status != TKI_OK) {
                    return status;
                }
            }
            exact_from_here = 1;
            theta = tki_exact_theta(vocab, *exact, tau, theta, last_token + length, length);
        }
        if (theta == TKI_NONE) {
            return TKI_ERR_INTERNAL;
        }
        last_forest_id[length] = vocab->rule[theta].forest_in;
        last_token[length] = theta;
    }
    return TKI_OK;
}

int32_t tki_step_lanes(const struct tki_vocab *vocab, tki_step_lane *lanes, size_t lane_count,
                       uint32_t flags) {
    if (lane_count > TKI_STEP_LANES) {
        return TKI_ERR_INTERNAL;
    }
    /* The walk takes the lanes longest first, so that those still walking at byte
     * i are a prefix of `order`; the lanes themselves stay where they are. */
    uint8_t order[TKI_STEP_LANES];
    for (size_t k = 0; k < lane_count; k++) {
        size_t j = k;
        for (; j > 0 && lanes[order[j - 1]].len < lanes[k].len; j--) {
            order[j] = order[j - 1];
        }
        order[j] = (uint8_t)k;
    }
    uint32_t watched_lane[TKI_STEP_LANES] = {0};
    if (vocab->watched_count > 0) {
        walk_lanes(vocab, lanes, order, lane_count, watched_lane, 1);
    } else {
        walk_lanes(vocab, lanes, order, lane_count, watched_lane, 0);
    }
    tki_exact_scratch *exact = NULL; /* made when a lane is watched */
    int32_t status = TKI_OK;
    for (size_t k = 0; status == TKI_OK && k < lane_count; k++) {
        status = watched_lane[k] ? decide_lane(vocab, &lanes[k], flags, &exact, 1)
                                 : decide_lane(vocab, &lanes[k], flags, &exact, 0);
    }
    if (exact != NULL) {
        tki_exact_scratch_free(exact);
        free(exact);
    }
    return status;
}
