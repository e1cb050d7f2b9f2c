/*
 * encode.c — the per-byte step of incremental BPE, and the encode entry points.
 *
 * For text s of length m, theta(m), the last token of BPE(s), is the longest
 * canonical suffix z of s that is locally valid: z is atomic, or
 *     valid_lo(z) <= last(m - |suc z|) < valid_hi(z),
 * last(i) being the forest id of theta(i) (0 for the empty prefix).  The
 * automaton gives the longest canonical suffix z = tau(state); in most steps
 * it is valid (the fast path).  Otherwise the answer lies on z's suffix
 * chain: most often it is suffix_parent[z], tried first; else the centroid
 * search finds it (O(log^2 t), the default), or the linear scan along
 * suffix_parent (kept as the oracle for both).
 * The BPE of the whole piece is then read backwards: theta(m),
 * theta(m - |theta(m)|), ...
 *
 * Memory per piece: two 4-byte arrays of piece length + 1 (forest ids and
 * tokens), allocated once per call for the longest piece.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "pretokenize_ascii.h"
#include "step.h"
#include "token_hash.h"

typedef struct step_arrays {
    uint32_t *last_forest_id; /* by prefix length: forest id of theta (run_steps: a window) */
    uint32_t *last_token;     /* by prefix length: rank of theta                           */
    size_t forest_capacity;   /* entries of last_forest_id                                 */
    /* The longest stretch of steps run_steps copied: last_token[m] equals
     * last_token[m - copied_period] for copied_from <= m <= copied_to
     * (copied_period 0: none). */
    size_t copied_from, copied_to, copied_period;
} step_arrays;

/*
 * A step reads the forest ids of at most the last t + 1 prefixes (t the
 * longest token), so run_steps keeps them in a window of FOREST_WINDOW(t)
 * entries that slides (the last t + 1 moved to its front when it is full), not
 * in an array of the piece's length: a long piece costs 4 bytes per byte (its
 * tokens), not 8.  An id that has left the window is rule[last_token].forest_in.
 */
#define FOREST_WINDOW(t) (16 * ((size_t)(t) + 1))

static inline uint32_t forest_id_of(const struct tki_vocab *vocab, const uint32_t *last_token,
                                    size_t length) {
    return length == 0 ? 0 : vocab->rule[last_token[length]].forest_in;
}

/*
 * Repeats.  For m > t (t the longest token), step m + 1 is a function of the
 * automaton state after m bytes and of last_forest_id[m - t + 1 .. m] alone.
 * So if at m and at an earlier m' >= t the state and that window are equal,
 * and the bytes after them agree (piece[m + j] == piece[m' + j]), then the
 * steps after m repeat those after m' exactly: they are copied, not run.  A
 * long run of one character or of a short unit (spaces, "ab", one emoji) is
 * periodic after a few hundred bytes and then costs a copy per byte.
 *
 * Candidates come from a rolling hash of (state, window) kept in a small
 * direct-mapped table; a candidate is checked in full before any copy.  Full
 * checks and restarts cost O(t), and at most one happens per t steps run,
 * so the O(log^2 t) bound per byte holds.
 */
enum { REPEAT_SLOTS = 256 }; /* indexed by the top 8 bits of a mixed key */
#define REPEAT_BASE 0x100000001b3ull

typedef struct repeat_slot {
    uint64_t key;
    size_t position; /* m: the window ends at m, the state is after m bytes */
    uint32_t state;
} repeat_slot;

typedef struct repeat_finder {
    size_t window;        /* t */
    uint64_t base_power;  /* REPEAT_BASE^window */
    uint64_t hash;        /* of last_forest_id[m - window + 1 .. m] */
    size_t hashed_until;  /* m of `hash`, or 0: not started */
    size_t next_check;    /* no full check before this m */
    repeat_slot slots[REPEAT_SLOTS];
} repeat_finder;

static void repeat_finder_init(repeat_finder *finder, size_t window) {
    finder->window = window;
    finder->base_power = 1;
    for (size_t i = 0; i < window; i++) {
        finder->base_power *= REPEAT_BASE;
    }
    finder->hash = 0;
    finder->hashed_until = 0;
    finder->next_check = 0;
    memset(finder->slots, 0, sizeof(finder->slots));
}

/* The window hash at m (m >= window), computed whole; forest[j - base] is last(j). */
static uint64_t window_hash(const uint32_t *forest, size_t base, size_t window, size_t m) {
    uint64_t hash = 0;
    for (size_t j = m - window + 1; j <= m; j++) {
        hash = hash * REPEAT_BASE + forest[j - base];
    }
    return hash;
}

/* Whether last(m - window + 1 .. m) (in the forest window) equals the same ids
 * ending at an earlier m' (read back through the tokens). */
static int windows_equal(const struct tki_vocab *vocab, const uint32_t *forest, size_t base,
                         const uint32_t *last_token, size_t window, size_t m, size_t earlier) {
    for (size_t j = 0; j < window; j++) {
        if (forest[m - window + 1 + j - base] != forest_id_of(vocab, last_token, earlier - window + 1 + j)) {
            return 0;
        }
    }
    return 1;
}

static inline uint64_t repeat_key(uint64_t hash, uint32_t state) {
    return hash ^ ((uint64_t)state * 0x9e3779b97f4a7c15ull);
}

/*
 * After step m (state after m bytes): records m, and returns an earlier m'
 * whose steps the following ones repeat (checked in full), or 0 if none.
 * forest[j - base] is last(j) for m - window <= j <= m.
 */
static size_t repeat_find(repeat_finder *finder, const struct tki_vocab *vocab, const uint32_t *forest,
                          size_t base, const uint32_t *last_token, uint32_t state, size_t m) {
    size_t window = finder->window;
    if (m < window) {
        return 0;
    }
    if (finder->hashed_until + 1 == m && finder->hashed_until != 0) {
        finder->hash = finder->hash * REPEAT_BASE + forest[m - base] -
                       finder->base_power * forest[m - window - base];
    } else {
        finder->hash = window_hash(forest, base, window, m); /* O(t): a (re)start */
        finder->next_check = m + window;
    }
    finder->hashed_until = m;
    uint64_t key = repeat_key(finder->hash, state);
    repeat_slot *slot = &finder->slots[(key * 0xff51afd7ed558ccdull) >> 56]; /* top bits mix best */
    size_t earlier = 0;
    if (slot->key == key && slot->state == state && slot->position >= window &&
        slot->position < m && m >= finder->next_check) {
        size_t candidate = slot->position;
        finder->next_check = m + window;
        if (windows_equal(vocab, forest, base, last_token, window, m, candidate)) {
            earlier = candidate;
        }
    }
    slot->key = key;
    slot->position = m;
    slot->state = state;
    return earlier;
}

/* The automaton state after piece[0..m): the last t bytes decide it. */
static uint32_t state_after(const struct tki_vocab *vocab, const uint8_t *piece, size_t m) {
    size_t window = vocab->max_token_bytes;
    uint32_t state = 0;
    for (size_t i = m > window ? m - window : 0; i < m; i++) {
        state = tki_automaton_next(vocab, state, piece[i]);
    }
    return state;
}

/*
 * Runs the step over piece[0..len), filling last_token[1..len] (the forest ids
 * go through the window of arrays->forest_capacity entries).  Steps that
 * repeat earlier ones are copied (above), except with TKI_METHOD_LINEAR: the
 * linear scan stays the plain oracle.
 * Returns TKI_ERR_INTERNAL if a search finds no valid suffix.
 */
static int32_t run_steps(const struct tki_vocab *vocab, const uint8_t *piece, size_t len,
                         uint32_t flags, step_arrays *arrays) {
    uint32_t *forest = arrays->last_forest_id; /* forest[j - base] is last(j) */
    uint32_t *last_token = arrays->last_token;
    size_t t = vocab->max_token_bytes, base = 0, capacity = arrays->forest_capacity;
    uint32_t state = 0;
    forest[0] = 0;
    last_token[0] = TKI_NONE;
    int find_repeats = (flags & TKI_METHOD_LINEAR) == 0 && len > 4 * t;
    arrays->copied_period = 0;
    repeat_finder finder;
    if (find_repeats) {
        repeat_finder_init(&finder, t);
    }
    for (size_t i = 0; i < len; i++) {
        size_t length = i + 1;
        if (length - base >= capacity) { /* full: keep last(length - 1 - t .. length - 1) */
            size_t keep_from = length - 1 - t;
            memmove(forest, forest + (keep_from - base), (t + 1) * sizeof(uint32_t));
            base = keep_from;
        }
        state = tki_automaton_next(vocab, state, piece[i]);
        tki_prefetch_after_row(vocab, state);
        uint32_t theta = tki_step_theta(vocab, tki_state_tau(vocab, state), state, forest,
                                        length - base, length, flags);
        if (theta == TKI_NONE) {
            return TKI_ERR_INTERNAL;
        }
        forest[length - base] = vocab->rule[theta].forest_in;
        last_token[length] = theta;
        if (!find_repeats) {
            continue;
        }
        size_t earlier = repeat_find(&finder, vocab, forest, base, last_token, state, length);
        if (earlier == 0) {
            continue;
        }
        /* Copy while the bytes repeat; then go on stepping from the state there. */
        size_t period = length - earlier, m = length;
        while (m < len && piece[m] == piece[m - period]) {
            last_token[m + 1] = last_token[m + 1 - period];
            m++;
        }
        if (m > length) {
            if (arrays->copied_period == 0 || m - length > arrays->copied_to + 1 - arrays->copied_from) {
                arrays->copied_from = length + 1;
                arrays->copied_to = m;
                arrays->copied_period = period;
            }
            i = m - 1;
            state = state_after(vocab, piece, m);
            base = m - t; /* the window again: last(m - t .. m), from the tokens */
            for (size_t j = base; j <= m; j++) {
                forest[j - base] = forest_id_of(vocab, last_token, j);
            }
        }
    }
    return TKI_OK;
}

/*
 * The tokens of a piece are read backwards from its end: theta(len), then
 * theta(len - |theta(len)|), ...: a chain of dependent loads, one per token.
 * Where run_steps copied steps with period p (last_token[m] equal to
 * last_token[m - p] for m in [from, to]), the chain read from a position e
 * is the chain read from e - q p shifted, so once the chain meets the phase
 * (e mod p) of an earlier position e' of the stretch again, the tokens read
 * from e' down to e repeat, as a block, for as long as the positions they
 * read stay in the stretch: for a block of span D = e' - e at position e,
 * e - D + 1 + p >= from and e + D <= to.  A megabyte of one emoji is then a
 * few blocks copied, not a chain of a million loads.
 */
enum { PHASE_SLOTS = 64 };

static size_t read_back_copied(const struct tki_vocab *vocab, const step_arrays *arrays,
                               size_t len, uint32_t *out) {
    const uint32_t *last_token = arrays->last_token;
    size_t from = arrays->copied_from, to = arrays->copied_to, period = arrays->copied_period;
    size_t phase_end[PHASE_SLOTS] = {0}; /* a position of the stretch the chain met, by phase */
    size_t phase_count[PHASE_SLOTS];     /* the tokens read before it                         */
    size_t count = 0, end = len;
    while (end > 0) {
        if (end >= from && end <= to) {
            size_t slot = (end % period) % PHASE_SLOTS;
            size_t earlier = phase_end[slot];
            if (earlier != 0 && (earlier - end) % period == 0) {
                size_t span = earlier - end, tokens = count - phase_count[slot];
                while (end >= span && end + 1 + period >= from + span && end + span <= to) {
                    memcpy(out + count, out + count - tokens, tokens * sizeof(uint32_t));
                    count += tokens;
                    end -= span;
                }
            }
            phase_end[slot] = end;
            phase_count[slot] = count;
            if (end == 0) {
                break;
            }
        }
        TKI_PREFETCH(&last_token[end > 256 ? end - 256 : 0]);
        out[count++] = last_token[end];
        end -= vocab->rule[last_token[end]].length;
    }
    return count;
}

/* Appends the BPE of a piece whose steps are in `arrays` to out. */
static size_t read_back(const struct tki_vocab *vocab, const step_arrays *arrays, size_t len,
                        uint32_t *out) {
    size_t count = 0;
    if (arrays->copied_period != 0) {
        count = read_back_copied(vocab, arrays, len, out);
    } else if (len > 256) {
        for (size_t end = len; end > 0; end -= vocab->rule[arrays->last_token[end]].length) {
            /* Each load's address waits on the one before: start the loads of the
             * lines ahead (downwards) early, so a long piece is not a chain of misses. */
            TKI_PREFETCH(&arrays->last_token[end > 256 ? end - 256 : 0]);
            out[count++] = arrays->last_token[end];
        }
    } else { /* a short piece's steps are in a few lines, just written */
        for (size_t end = len; end > 0; end -= vocab->rule[arrays->last_token[end]].length) {
            out[count++] = arrays->last_token[end];
        }
    }
    for (size_t i = 0; i < count / 2; i++) {
        uint32_t swap = out[i];
        out[i] = out[count - 1 - i];
        out[count - 1 - i] = swap;
    }
    return count;
}

/*
 * Short pieces stepped side by side.  One piece's steps form a chain of
 * dependent table loads (state -> tile row -> next state -> rule), each a
 * likely cache miss on real text; the pieces of a batch are independent, so
 * stepping several of them in the same loop lets their misses overlap.
 * "Short" is up to 512 bytes: run_steps looks for repeats only in pieces
 * longer than 4t (t = 128 in the OpenAI vocabularies), so up to there lanes
 * lose nothing, and real text's long pieces (runs of CJK, long words in other
 * scripts) overlap with the rest.
 */
enum { SHORT_PIECE_BYTES = 512, STEP_LANES = 16 };
#define NOT_STEPPED UINT32_MAX /* a piece of a batch that no lane stepped */

typedef struct step_lane {
    const uint8_t *piece;
    size_t len;
    step_arrays arrays; /* views into the batch's short-piece scratch */
} step_lane;

/*
 * run_steps for up to STEP_LANES pieces at once; the same results, lane by
 * lane.  The automaton's walk does not depend on the decisions, so it goes
 * first, for all lanes side by side: a chain of two loads per byte (row, then
 * tile), the lanes' chains overlapping, with each byte's longest canonical
 * suffix (tau) parked in last_token and its rule prefetched, and the state
 * in last_forest_id (whose entry there the decision overwrites; a search
 * reads tau's suffix parent from the state's row, a line read recently).
 * The decisions then run lane by lane, their rules already loaded, and their
 * branches no longer hold up the walk.
 */
static int32_t run_steps_lanes(const struct tki_vocab *vocab, step_lane *lanes, size_t lane_count,
                               uint32_t flags) {
    uint32_t state[STEP_LANES] = {0};
    /* Longest first, so the lanes still walking at byte i are a prefix. */
    for (size_t k = 1; k < lane_count; k++) {
        for (size_t j = k; j > 0 && lanes[j].len > lanes[j - 1].len; j--) {
            step_lane swap = lanes[j];
            lanes[j] = lanes[j - 1];
            lanes[j - 1] = swap;
        }
    }
    size_t live = lane_count;
    for (size_t i = 0; live > 0; i++) {
        while (live > 0 && lanes[live - 1].len <= i) {
            live--;
        }
        for (size_t k = 0; k < live; k++) {
            state[k] = tki_automaton_next(vocab, state[k], lanes[k].piece[i]);
            tki_prefetch_after_row(vocab, state[k]);
        }
        for (size_t k = 0; k < live; k++) {
            uint32_t tau = tki_state_tau(vocab, state[k]);
            lanes[k].arrays.last_token[i + 1] = tau; /* read from the row the next byte reads */
            lanes[k].arrays.last_forest_id[i + 1] = state[k]; /* until the decision there */
            TKI_PREFETCH(&vocab->rule[tau]);
        }
    }
    for (size_t k = 0; k < lane_count; k++) {
        uint32_t *last_forest_id = lanes[k].arrays.last_forest_id;
        uint32_t *last_token = lanes[k].arrays.last_token;
        last_forest_id[0] = 0;
        last_token[0] = TKI_NONE;
        for (size_t length = 1; length <= lanes[k].len; length++) {
            uint32_t theta = tki_step_theta(vocab, last_token[length], last_forest_id[length],
                                            last_forest_id, length, length, flags);
            if (theta == TKI_NONE) {
                return TKI_ERR_INTERNAL;
            }
            last_forest_id[length] = vocab->rule[theta].forest_in;
            last_token[length] = theta;
        }
    }
    return TKI_OK;
}

static void step_arrays_free(step_arrays *arrays) {
    free(arrays->last_forest_id);
    free(arrays->last_token);
    arrays->last_forest_id = NULL;
    arrays->last_token = NULL;
}

static int32_t step_arrays_init(step_arrays *arrays, const struct tki_vocab *vocab, size_t longest) {
    arrays->last_forest_id = NULL;
    arrays->last_token = NULL;
    if (longest >= SIZE_MAX / sizeof(uint32_t) - 1) {
        return TKI_ERR_NOMEM;
    }
    size_t window = FOREST_WINDOW(vocab->max_token_bytes);
    arrays->forest_capacity = longest + 1 < window ? longest + 1 : window;
    arrays->last_forest_id = malloc(arrays->forest_capacity * sizeof(uint32_t));
    arrays->last_token = tki_table_alloc((longest + 1) * sizeof(uint32_t)); /* huge pages when long */
    if (arrays->last_forest_id == NULL || arrays->last_token == NULL) {
        step_arrays_free(arrays);
        return TKI_ERR_NOMEM;
    }
    return TKI_OK;
}

/*
 * Encodes pieces one after another with scratch that grows to the longest
 * piece seen (doubling), so a call needs memory for its longest piece only.
 */
typedef struct piece_encoder {
    const struct tki_vocab *vocab;
    uint32_t flags;
    int use_heap;
    size_t capacity;
    step_arrays arrays;
    tki_heap_workspace heap;
} piece_encoder;

static int32_t piece_encoder_init(piece_encoder *encoder, const struct tki_vocab *vocab,
                                  uint32_t flags) {
    memset(encoder, 0, sizeof(*encoder));
    encoder->vocab = vocab;
    encoder->flags = flags;
    encoder->use_heap = (flags & TKI_METHOD_HEAP) || !vocab->incremental;
    if (!encoder->use_heap && (flags & TKI_METHOD_LINEAR) == 0 && vocab->decomposition == NULL) {
        return TKI_ERR_INTERNAL;
    }
    return TKI_OK;
}

static void piece_encoder_free(piece_encoder *encoder) {
    step_arrays_free(&encoder->arrays);
    if (encoder->heap.capacity > 0) {
        tki_heap_workspace_free(&encoder->heap);
    }
    encoder->capacity = 0;
}

static int32_t piece_encoder_reserve(piece_encoder *encoder, size_t len) {
    if (len <= encoder->capacity) {
        return TKI_OK;
    }
    size_t capacity = encoder->capacity * 2 > len ? encoder->capacity * 2 : len;
    if (capacity < 256) {
        capacity = 256;
    }
    piece_encoder_free(encoder);
    int32_t status = encoder->use_heap ? tki_heap_workspace_init(&encoder->heap, capacity)
                                       : step_arrays_init(&encoder->arrays, encoder->vocab, capacity);
    if (status == TKI_OK) {
        encoder->capacity = capacity;
    }
    return status;
}

/*
 * Appends the ids of one piece to out; *count grows by their number.
 * `shortcut_rank` is the piece's own rank when the caller has looked it up
 * (TKI_NONE if it is no token), or TKI_UNKNOWN_RANK to look it up here.
 */
#define TKI_UNKNOWN_RANK (TKI_NONE - 1)

static int32_t piece_encoder_encode(piece_encoder *encoder, const uint8_t *piece, size_t len,
                                    uint32_t shortcut_rank, uint32_t *out, size_t *count) {
    const struct tki_vocab *vocab = encoder->vocab;
    if (len == 0) {
        return TKI_OK;
    }
    /*
     * The whole-piece shortcut.  Beyond tiktoken's semantics (it is what makes
     * a non-canonical token reachable) it is the fast path on real text: most
     * pieces are whole tokens, and one hash probe beats a step per byte.
     */
    if (encoder->flags & TKI_WHOLE_PIECE_SHORTCUT) {
        uint32_t rank = shortcut_rank == TKI_UNKNOWN_RANK ? tki_lookup_rank(vocab, piece, len)
                                                          : shortcut_rank;
        if (rank != TKI_NONE) {
            out[(*count)++] = rank;
            return TKI_OK;
        }
    }
    int32_t status = piece_encoder_reserve(encoder, len);
    if (status != TKI_OK) {
        return status;
    }
    if (encoder->use_heap) {
        size_t produced = 0;
        status = tki_heap_bpe(vocab, &encoder->heap, piece, len, out + *count, &produced, NULL);
        *count += produced;
        return status;
    }
    status = run_steps(vocab, piece, len, encoder->flags, &encoder->arrays);
    if (status == TKI_OK) {
        *count += read_back(vocab, &encoder->arrays, len, out + *count);
    }
    return status;
}

int32_t tki_encode_pieces(const tki_vocab *vocab, const uint8_t *data, size_t data_len,
                          const size_t *piece_ends, size_t piece_count, uint32_t flags,
                          uint32_t *out, size_t out_capacity, size_t *out_count) {
    if (vocab == NULL || out_count == NULL || (data == NULL && data_len > 0) ||
        (piece_ends == NULL && piece_count > 0) || (out == NULL && out_capacity > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    *out_count = 0;
    size_t start = 0;
    for (size_t k = 0; k < piece_count; k++) {
        if (piece_ends[k] < start || piece_ends[k] > data_len) {
            return TKI_ERR_ARGUMENT;
        }
        start = piece_ends[k];
    }
    if (start != data_len || out_capacity < data_len) {
        return TKI_ERR_ARGUMENT;
    }
    piece_encoder encoder;
    int32_t status = piece_encoder_init(&encoder, vocab, flags);
    size_t count = 0;
    start = 0;
    for (size_t k = 0; status == TKI_OK && k < piece_count; k++) {
        status = piece_encoder_encode(&encoder, data + start, piece_ends[k] - start,
                                      TKI_UNKNOWN_RANK, out, &count);
        start = piece_ends[k];
    }
    piece_encoder_free(&encoder);
    if (status == TKI_OK) {
        *out_count = count;
    }
    return status;
}

/*
 * Long runs of ASCII digits with cl100k's and o200k's patterns.  There a piece
 * that starts at three ASCII digits is those three (tki_three_ascii_digits),
 * so such a run is cut into threes here, without the pre-tokenizer, and a three
 * equal to the one before takes its id without a lookup: a long number, or a
 * megabyte of "0", costs a compare and a store per piece.  Runs shorter than
 * DIGIT_RUN_BYTES (numbers in real text) stay in the batches.
 */
enum { DIGIT_RUN_BYTES = 24 };

static inline int long_digit_run_at(const uint8_t *data, size_t data_len, size_t at) {
    for (size_t i = 0; i < DIGIT_RUN_BYTES; i += 3) {
        if (!tki_three_ascii_digits(data, data_len, at + i)) {
            return 0;
        }
    }
    return 1;
}

/*
 * Appends the ids of the threes of ASCII digits from `at`; returns where they
 * end (`at` if none: a three that is no token of this vocabulary is left to
 * the general path).
 */
static size_t encode_digit_threes(const struct tki_vocab *vocab, const uint8_t *data,
                                  size_t data_len, size_t at, uint32_t *out, size_t *count) {
    uint32_t previous_key = UINT32_MAX, rank = TKI_NONE;
    for (; tki_three_ascii_digits(data, data_len, at); at += 3) {
        const uint8_t *three = data + at;
        uint32_t key = three[0] | (uint32_t)three[1] << 8 | (uint32_t)three[2] << 16;
        if (key != previous_key) {
            rank = tki_lookup_rank(vocab, three, 3);
            if (rank == TKI_NONE) {
                break;
            }
            previous_key = key;
        }
        out[(*count)++] = rank;
    }
    return at;
}

/*
 * Splits a batch of up to SPLIT_BATCH pieces from pos and starts their
 * lookups (tki_hash_locate); returns how many.  It stops early before a long
 * run of digits (the caller takes it first) and sets *status on an internal
 * error.  Always inlined, and called with a constant pattern, so that each
 * pattern gets a copy of the pre-tokenizer's shortcut with its tests folded.
 */
enum { SPLIT_BATCH = 256 };

static TKI_ALWAYS_INLINE size_t split_batch(const struct tki_vocab *vocab, int32_t pattern,
                                            const uint8_t *data, size_t data_len, size_t pos,
                                            size_t *piece_end, tki_hash_probe_state *where,
                                            uint8_t *repeats_previous, int32_t *status) {
    int digit_threes = pattern == TKI_PATTERN_CL100K || pattern == TKI_PATTERN_O200K;
    size_t pieces = 0, previous_len = 0;
    for (size_t at = pos; pieces < SPLIT_BATCH && at < data_len; pieces++) {
        size_t end = tki_pretokenize_next(pattern, data, data_len, at);
        if (end <= at || end > data_len) {
            *status = TKI_ERR_INTERNAL;
            break;
        }
        /* (such a run starts with a piece of three digits) */
        if (pieces > 0 && digit_threes && end - at == 3 && long_digit_run_at(data, data_len, at)) {
            break; /* the batch so far first, then the run */
        }
        /* A piece of up to 8 bytes equal to the one before (runs of digits,
         * hostile text) takes its rank without a lookup. */
        size_t len = end - at;
        repeats_previous[pieces] =
            pieces > 0 && len <= 8 && len == previous_len &&
            tki_hash_head(data + at, len, data_len - at) == where[pieces - 1].head;
        if (repeats_previous[pieces]) {
            where[pieces] = where[pieces - 1];
        } else if (len <= vocab->max_token_bytes) {
            where[pieces] = tki_hash_locate(vocab, data + at, len, data_len - at);
        } else { /* no token: tki_hash_probe answers from the length alone */
            where[pieces] = (tki_hash_probe_state){0, 0, 0};
        }
        piece_end[pieces] = end;
        previous_len = len;
        at = end;
    }
    return pieces;
}

int32_t tki_encode_text(const tki_vocab *vocab, int32_t pattern, const uint8_t *data,
                        size_t data_len, uint32_t flags, uint32_t *out, size_t out_capacity,
                        size_t *out_count, size_t *out_last_piece_tokens) {
    if (vocab == NULL || out_count == NULL || (data == NULL && data_len > 0) ||
        (out == NULL && out_capacity > 0) || out_capacity < data_len ||
        pattern < TKI_PATTERN_R50K || pattern > TKI_PATTERN_O200K) {
        return TKI_ERR_ARGUMENT;
    }
    *out_count = 0;
    /*
     * Pieces go in batches: split a batch, start the hash loads of all its
     * pieces, then encode them in order, so the cache misses of the lookups
     * overlap instead of queueing one behind the other.
     */
    enum { BATCH = SPLIT_BATCH, STEP_POOL = 8192 };
    size_t piece_end[BATCH];
    uint32_t piece_rank[BATCH];
    uint32_t piece_steps[BATCH]; /* a stepped short piece's offset in the pool, or NOT_STEPPED */
    tki_hash_probe_state where[BATCH];
    uint8_t repeats_previous[BATCH]; /* 1: the piece's bytes are the previous piece's */
    /* Steps of the batch's short non-token pieces, each len + 1 entries. */
    uint32_t pool_forest_id[STEP_POOL];
    uint32_t pool_token[STEP_POOL];
    piece_encoder encoder;
    int32_t status = piece_encoder_init(&encoder, vocab, flags | TKI_WHOLE_PIECE_SHORTCUT);
    int lanes_usable = !encoder.use_heap;
    size_t count = 0, last_piece_tokens = 0;
    int digit_threes = pattern == TKI_PATTERN_CL100K || pattern == TKI_PATTERN_O200K;
    for (size_t pos = 0; status == TKI_OK && pos < data_len;) {
        if (digit_threes && long_digit_run_at(data, data_len, pos)) {
            size_t after = encode_digit_threes(vocab, data, data_len, pos, out, &count);
            if (after > pos) {
                last_piece_tokens = 1;
                pos = after;
                continue;
            }
        }
        size_t pieces = 0;
        switch (pattern) { /* one copy of the split per pattern, its tests folded */
        case TKI_PATTERN_R50K:
            pieces = split_batch(vocab, TKI_PATTERN_R50K, data, data_len, pos, piece_end, where,
                                 repeats_previous, &status);
            break;
        case TKI_PATTERN_CL100K:
            pieces = split_batch(vocab, TKI_PATTERN_CL100K, data, data_len, pos, piece_end, where,
                                 repeats_previous, &status);
            break;
        default:
            pieces = split_batch(vocab, TKI_PATTERN_O200K, data, data_len, pos, piece_end, where,
                                 repeats_previous, &status);
            break;
        }
        /*
         * Whole-piece lookups; short pieces that are no token are stepped in
         * lanes.  The batch ends early where the pool is full.
         */
        step_lane lanes[STEP_LANES];
        size_t lane_count = 0, pool_used = 0;
        for (size_t k = 0, start = pos; status == TKI_OK && k < pieces; k++) {
            size_t len = piece_end[k] - start;
            piece_rank[k] = repeats_previous[k] ? piece_rank[k - 1]
                                                : tki_hash_probe(vocab, where[k], data + start, len);
            piece_steps[k] = NOT_STEPPED;
            if (piece_rank[k] == TKI_NONE && lanes_usable && len <= SHORT_PIECE_BYTES) {
                if (pool_used + len + 1 > STEP_POOL) {
                    pieces = k;
                    break;
                }
                piece_steps[k] = (uint32_t)pool_used;
                lanes[lane_count].piece = data + start;
                lanes[lane_count].len = len;
                lanes[lane_count].arrays.last_forest_id = pool_forest_id + pool_used;
                lanes[lane_count].arrays.last_token = pool_token + pool_used;
                lanes[lane_count].arrays.forest_capacity = len + 1;
                lanes[lane_count].arrays.copied_period = 0;
                pool_used += len + 1;
                if (++lane_count == STEP_LANES) {
                    status = run_steps_lanes(vocab, lanes, lane_count, encoder.flags);
                    lane_count = 0;
                }
            }
            start = piece_end[k];
        }
        if (status == TKI_OK && lane_count > 0) {
            status = run_steps_lanes(vocab, lanes, lane_count, encoder.flags);
        }
        for (size_t k = 0; status == TKI_OK && k < pieces; k++) {
            size_t before = count, len = piece_end[k] - pos;
            if (piece_rank[k] != TKI_NONE) { /* a whole token: most pieces of real text */
                out[count++] = piece_rank[k];
            } else if (piece_steps[k] != NOT_STEPPED) {
                step_arrays stepped = {pool_forest_id + piece_steps[k], pool_token + piece_steps[k], len + 1, 0, 0, 0};
                count += read_back(vocab, &stepped, len, out + count);
            } else {
                status = piece_encoder_encode(&encoder, data + pos, len, piece_rank[k], out, &count);
            }
            last_piece_tokens = count - before;
            pos = piece_end[k];
        }
    }
    piece_encoder_free(&encoder);
    if (status == TKI_OK) {
        *out_count = count;
        if (out_last_piece_tokens != NULL) {
            *out_last_piece_tokens = last_piece_tokens;
        }
    }
    return status;
}

int64_t tki_encode_job_run(tki_encode_job *job, const uint8_t *data, size_t data_len) {
    if (job == NULL) {
        return -(int64_t)TKI_ERR_ARGUMENT;
    }
    size_t count = 0;
    int32_t status = tki_encode_text(job->vocab, job->pattern, data, data_len, job->flags, job->out,
                                     job->out_capacity, &count, &job->last_piece_tokens);
    return status == TKI_OK ? (int64_t)count : -(int64_t)status;
}

int64_t tki_encode_job_run_many(tki_encode_job *job, const uint8_t *data, const size_t *text_ends,
                                size_t text_count, uint64_t *token_ends) {
    if (job == NULL || (text_count > 0 && (text_ends == NULL || token_ends == NULL))) {
        return -(int64_t)TKI_ERR_ARGUMENT;
    }
    size_t start = 0, total = 0;
    for (size_t i = 0; i < text_count; i++) {
        if (text_ends[i] < start || text_ends[i] - start > job->out_capacity - total ||
            (data == NULL && text_ends[i] > start)) {
            return -(int64_t)TKI_ERR_ARGUMENT;
        }
        size_t count = 0;
        const uint8_t *text = data == NULL ? NULL : data + start;
        int32_t status = tki_encode_text(job->vocab, job->pattern, text, text_ends[i] - start,
                                         job->flags, job->out + total, job->out_capacity - total,
                                         &count, &job->last_piece_tokens);
        if (status != TKI_OK) {
            return -(int64_t)status;
        }
        total += count;
        token_ends[i] = total;
        start = text_ends[i];
    }
    return (int64_t)total;
}

int32_t tki_prefix_last_tokens(const tki_vocab *vocab, const uint8_t *data, size_t data_len,
                               uint32_t flags, uint32_t *out_last_token) {
    if (vocab == NULL || (data_len > 0 && (data == NULL || out_last_token == NULL))) {
        return TKI_ERR_ARGUMENT;
    }
    if (!vocab->incremental || (flags & ~(uint32_t)TKI_METHOD_LINEAR) != 0) {
        return TKI_ERR_ARGUMENT;
    }
    step_arrays arrays;
    int32_t status = step_arrays_init(&arrays, vocab, data_len);
    if (status == TKI_OK) {
        status = run_steps(vocab, data, data_len, flags, &arrays);
    }
    if (status == TKI_OK && data_len > 0) {
        memcpy(out_last_token, arrays.last_token + 1, data_len * sizeof(uint32_t));
    }
    step_arrays_free(&arrays);
    return status;
}
