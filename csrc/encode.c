/*
 * encode.c — the engine: the pieces of a text, encoded in batches.
 *
 * Every way in (one-shot encode, the stream, the bounded calls, batches)
 * encodes through tki_engine_encode.  A text is cut into the pieces of its
 * pattern (pretokenize.c; with pattern 0, a stretch is one piece), and
 *   - pieces go in batches: split a batch, start the hash loads of all its
 *     pieces (tki_hash_locate), then take their answers, so the cache misses
 *     of the lookups overlap instead of queueing one behind the other;
 *   - a piece that is itself a token is that token (tiktoken's whole-piece
 *     shortcut, and most pieces of real text);
 *   - the short pieces that are not tokens are stepped side by side in lanes
 *     (steps.c), the long ones by a stepper that copies periodic stretches;
 *   - with cl100k's and o200k's patterns a long run of digits is cut into
 *     threes without the pre-tokenizer;
 *   - a vocabulary the incremental algorithm cannot encode exactly uses the
 *     heap BPE (reference_bpe.c) for every piece.
 * Given a text that may continue (a stream's pending text), the pieces that
 * 64-byte windows lying inside the text decide are final as they are (no
 * byte after a window moves its starts: pretokenize_block.h); the others
 * (those less than a window from the end, and text the windows leave to the
 * per-piece matcher) are matched one at a time, and the engine stops at the
 * first piece whose match depended on the end of the text: that piece and the
 * rest wait for more (stream.c takes the open piece on eagerly).
 *
 * Stack: about 20 KiB per call (the batch's arrays and a small lane pool; a
 * long text's lane pool is allocated), so that threads with small stacks
 * (musl's 128 KiB) can encode.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "piece_memo.h"
#include "pretokenize_ascii.h"
#include "pretokenize_block.h"
#include "step.h"
#include "token_hash.h"

/* ------------------------------------------------------------------ one piece */

void tki_engine_init(tki_engine *engine, const struct tki_vocab *vocab, int32_t pattern,
                     uint32_t flags) {
    /* Field by field: the stepper of long pieces (a few hundred bytes) is made when a
     * piece first needs it (tki_engine_encode_piece), not zeroed per call. */
    engine->vocab = vocab;
    engine->pattern = pattern;
    engine->compiled = NULL;
    engine->scan = NULL;
    engine->flags = flags & (TKI_METHOD_LINEAR | TKI_METHOD_HEAP);
    engine->use_heap = (flags & TKI_METHOD_HEAP) || !vocab->incremental;
    engine->long_piece_made = 0;
    memset(&engine->heap, 0, sizeof(engine->heap));
    engine->lane_pool = NULL;
}

void tki_engine_use_compiled(tki_engine *engine, const tki_pattern *compiled, tki_pattern_scan *scan) {
    engine->pattern = TKI_PATTERN_COMPILED;
    engine->compiled = compiled;
    engine->scan = scan;
}

void tki_engine_free(tki_engine *engine) {
    if (engine->long_piece_made) {
        tki_stepper_free(&engine->long_piece);
        engine->long_piece_made = 0;
    }
    if (engine->heap.capacity > 0) {
        tki_heap_workspace_free(&engine->heap);
    }
    free(engine->lane_pool);
    engine->lane_pool = NULL;
}

/* Whether the engine can encode at all: the centroid blocks exist unless another method is asked for. */
int32_t tki_engine_check(const tki_engine *engine) {
    if (!engine->use_heap && (engine->flags & TKI_METHOD_LINEAR) == 0 &&
        engine->vocab->decomposition == NULL) {
        return TKI_ERR_INTERNAL;
    }
    return TKI_OK;
}

/* The heap BPE's workspace for a piece of len bytes (grown by doubling; kept on failure). */
static int32_t reserve_heap(tki_engine *engine, size_t len) {
    if (len <= engine->heap.capacity) {
        return TKI_OK;
    }
    size_t capacity = engine->heap.capacity * 2 > len ? engine->heap.capacity * 2 : len;
    if (capacity < 256) {
        capacity = 256;
    }
    tki_heap_workspace grown;
    int32_t status = tki_heap_workspace_init(&grown, capacity);
    if (status != TKI_OK) {
        return status;
    }
    if (engine->heap.capacity > 0) {
        tki_heap_workspace_free(&engine->heap);
    }
    engine->heap = grown;
    return TKI_OK;
}

int32_t tki_engine_encode_piece(tki_engine *engine, const uint8_t *piece, size_t len,
                                uint32_t shortcut_rank, uint32_t *out, size_t *count) {
    const struct tki_vocab *vocab = engine->vocab;
    if (len == 0) {
        return TKI_OK;
    }
    /*
     * The whole-piece shortcut.  Beyond tiktoken's semantics (it is what makes
     * a non-canonical token reachable) it is the fast path on real text: most
     * pieces are whole tokens, and one hash probe beats a step per byte.
     */
    uint32_t rank = shortcut_rank == TKI_UNKNOWN_RANK ? tki_lookup_rank(vocab, piece, len) : shortcut_rank;
    if (rank != TKI_NONE) {
        out[(*count)++] = rank;
        return TKI_OK;
    }
    if (engine->use_heap) {
        int32_t status = reserve_heap(engine, len);
        size_t produced = 0;
        if (status == TKI_OK) {
            status = tki_heap_bpe(vocab, &engine->heap, piece, len, out + *count, &produced, NULL);
        }
        *count += produced;
        return status;
    }
    tki_stepper *stepper = &engine->long_piece;
    if (!engine->long_piece_made) {
        tki_stepper_init(stepper, vocab, engine->flags & TKI_METHOD_LINEAR);
        engine->long_piece_made = 1;
    }
    tki_stepper_reset(stepper);
    int32_t status = tki_stepper_run(stepper, piece, 0, len);
    if (status != TKI_OK) {
        return status;
    }
    size_t produced = tki_stepper_read_back(stepper, len, 0, out + *count);
    if (produced == SIZE_MAX) {
        return TKI_ERR_INTERNAL;
    }
    *count += produced;
    return TKI_OK;
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
 * run of digits (the caller takes it first), and, unless `final`, at a piece
 * whose match depended on the end of the text (*open_at, else untouched:
 * pieces from windows inside the text first, the rest one at a time); it
 * sets *status on an internal error.  Always inlined, and called with a
 * constant pattern and `final`, so that each gets a copy of the
 * pre-tokenizer's shortcut with its tests folded.
 */
enum { SPLIT_BATCH = 256 };

/*
 * split_batch's pattern for a compiled pattern whose text a built-in
 * pattern's splitter splits (tki_pattern_use_builtin): COMPILED_BODY_OF +
 * that built-in pattern.  The built-in splitter reads text several times
 * faster than the compiled automaton (on English, per document, 915 against
 * 277 MiB/s on one core: its 64-byte windows are decided by vector compares,
 * where the automaton takes a dependent load and a branch that mispredicts at
 * every piece end), and the two match the same piece at every position but
 * where the built-in one's reaches the end of the text.  In a final text that
 * piece, and the rest of the batch, are the compiled pattern's.  In a text
 * that goes on (a stream's), a piece the built-in splitter decides without
 * reading to the end ends there for every continuation, so short of the end
 * in each: the compiled pattern's piece too; the piece it leaves open goes
 * back to the stream, whose open piece the compiled automaton matches.
 */
enum { COMPILED_BODY_OF = 8 };

static TKI_ALWAYS_INLINE size_t split_batch(const tki_engine *engine, int32_t pattern,
                                            int final, const uint8_t *data, size_t data_len,
                                            size_t pos, tki_scan_memo *memo, const tki_hash_view *hash,
                                            size_t *piece_end, tki_hash_probe_state *where,
                                            uint8_t *repeats_previous, size_t *open_at, int32_t *status) {
    int digit_threes = pattern == TKI_PATTERN_CL100K || pattern == TKI_PATTERN_O200K;
    const int32_t body = pattern > COMPILED_BODY_OF ? pattern - COMPILED_BODY_OF : 0;
    const int32_t split_pattern = body != 0 ? body : pattern; /* the built-in splitter's, in a text that goes on */
    int compiled_tail = 0; /* body: the built-in splitter's piece reached the end of the text */
    size_t pieces = 0, previous_len = 0;
    tki_piece_cursor cursor = {0}; /* the pieces of 64-byte windows (pretokenize_block.h) */
    tki_pattern_cursor compiled_cursor;    /* a compiled pattern's pieces in a row (pattern.c) */
    compiled_cursor.next = compiled_cursor.count = 0;
    for (size_t at = pos; pieces < SPLIT_BATCH && at < data_len; pieces++) {
        size_t end;
        if (body != 0 && final && !compiled_tail) {
            end = tki_piece_cursor_next(&cursor, body, data, data_len, at);
            if (end == data_len) { /* perhaps an end-anchored alternative's: the compiled pattern's own */
                compiled_tail = 1;
                end = tki_pattern_cursor_next(&compiled_cursor, engine->compiled, engine->scan, data, data_len,
                                              at, 1, NULL, SPLIT_BATCH - pieces);
            }
        } else if (pattern == TKI_PATTERN_COMPILED || (body != 0 && final)) {
            int touched_end = 0;
            end = tki_pattern_cursor_next(&compiled_cursor, engine->compiled, engine->scan, data, data_len, at,
                                          final, final ? NULL : &touched_end, SPLIT_BATCH - pieces);
            if (touched_end) {
                *open_at = at;
                break;
            }
        } else if (final) {
            end = tki_piece_cursor_next(&cursor, pattern, data, data_len, at);
        } else {
            /* Pieces that whole windows decide are final; the others one at a time (the
             * shortcut never looks at the end; the full matcher says when it did). */
            end = tki_piece_cursor_next_final(&cursor, split_pattern, data, data_len, at);
            if (end == 0) {
                end = tki_pretokenize_ascii(split_pattern, data, data_len, at, 0);
            }
            if (end == 0) {
                /* Only the first piece's scans can resume in a later call (the stream drops
                 * its memo when the text moves on): the others are matched as one-shot
                 * calls match them, without a memo, so with the matcher's shortcuts. */
                int touched_end = 0;
                end = at == 0 ? tki_pretokenize_match_ex(split_pattern, data, data_len, at, memo, 1, &touched_end)
                              : tki_pretokenize_match_open(split_pattern, data, data_len, at, &touched_end);
                if (touched_end) {
                    *open_at = at; /* more text may change this piece: it and the rest wait */
                    break;
                }
            }
        }
        if (end <= at || end > data_len) {
            *status = TKI_ERR_INTERNAL;
            break;
        }
        /* (such a run starts with a piece of three digits; the digit is tested before the
         * length, which is no sign of a digit: "，" has three bytes too) */
        if (digit_threes && (uint8_t)(data[at] - '0') < 10 && end - at == 3 && pieces > 0 &&
            long_digit_run_at(data, data_len, at)) {
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
        } else if (len <= hash->max_token_bytes || len <= TKI_MEMO_PIECE_BYTES) { /* (the memo's key too) */
            where[pieces] = tki_hash_locate_in(hash, data + at, len, data_len - at);
        } else {
            where[pieces] = TKI_HASH_NO_TOKEN;
        }
        piece_end[pieces] = end;
        previous_len = len;
        at = end;
    }
    return pieces;
}


/*
 * Short pieces (up to SHORT_PIECE_BYTES) are stepped in lanes: the stepper
 * looks for repeats only in pieces longer than 4t (t = 128 in the OpenAI
 * vocabularies), so up to there lanes lose nothing, and real text's long
 * pieces (runs of CJK, long words in other scripts) overlap with the rest.
 * Their steps go to a pool, each piece len + 1 entries: SMALL_POOL on the
 * stack, LARGE_POOL (allocated once per engine) for long texts.  A batch ends
 * early where the pool is full.
 */
enum { SHORT_PIECE_BYTES = 512, SMALL_POOL = 1024, LARGE_POOL = 8192 };
#define NOT_STEPPED UINT32_MAX     /* a piece of a batch that no lane stepped */
#define FOUND_IN_MEMO (UINT32_MAX - 1) /* a piece whose ranks the memo holds */

/* The batches of tki_engine_encode, for one pattern (inlined with it constant). */
static TKI_ALWAYS_INLINE int32_t encode_batches(tki_engine *engine, int32_t pattern, int final,
                                                const uint8_t *data, size_t data_len,
                                                tki_scan_memo *memo, uint32_t *out, size_t *count_io,
                                                size_t *stop, size_t *last_piece_tokens) {
    const struct tki_vocab *vocab = engine->vocab;
    size_t piece_end[SPLIT_BATCH];
    uint32_t piece_rank[SPLIT_BATCH];
    uint32_t piece_steps[SPLIT_BATCH]; /* a stepped short piece's offset in the pool, or NOT_STEPPED */
    tki_hash_probe_state where[SPLIT_BATCH];
    uint8_t repeats_previous[SPLIT_BATCH]; /* 1: the piece's bytes are the previous piece's */
    uint16_t no_token[SPLIT_BATCH];        /* the batch's pieces that are no token */
    uint32_t small_forest_id[SMALL_POOL], small_token[SMALL_POOL];
    uint32_t *pool_forest_id = small_forest_id, *pool_token = small_token;
    size_t pool_capacity = SMALL_POOL;
    int lanes_usable = !engine->use_heap;
    if (lanes_usable && data_len > 2 * SMALL_POOL) {
        if (engine->lane_pool == NULL) {
            engine->lane_pool = malloc(2 * LARGE_POOL * sizeof(uint32_t)); /* NULL: the small pool */
        }
        if (engine->lane_pool != NULL) {
            pool_forest_id = engine->lane_pool;
            pool_token = engine->lane_pool + LARGE_POOL;
            pool_capacity = LARGE_POOL;
        }
    }
    const tki_hash_view hash = tki_hash_view_of(vocab);
    /* The memo of short pieces (piece_memo.h), with the default method only: a call that
     * asks for another method (the tests of each) steps every piece with it. */
    tki_piece_memo *piece_memo = lanes_usable && engine->flags == 0 ? tki_memo_take(vocab) : NULL;
    int32_t status = TKI_OK;
    size_t count = *count_io, last_tokens = *last_piece_tokens;
    int digit_threes = pattern == TKI_PATTERN_CL100K || pattern == TKI_PATTERN_O200K;
    size_t open_at = SIZE_MAX, pos = 0;
    while (status == TKI_OK && pos < data_len && open_at == SIZE_MAX) {
        if (digit_threes && long_digit_run_at(data, data_len, pos)) {
            size_t digits_count = count; /* (count itself stays in a register) */
            size_t after = encode_digit_threes(vocab, data, data_len, pos, out, &digits_count);
            count = digits_count;
            if (after > pos) {
                last_tokens = 1;
                pos = after;
                continue;
            }
        }
        size_t pieces = split_batch(engine, pattern, final, data, data_len, pos, memo, &hash, piece_end, where,
                                    repeats_previous, &open_at, &status);
        /* Whole-piece lookups.  The batch's first pieces, as long as each is a whole token,
         * go out at once (`direct`); from the first that is not, the ids go out in a last
         * pass, after the lanes.  A short piece that is no token starts loading its memo
         * slot here and is looked up there in the next pass, so that the loads overlap. */
        size_t direct = 0, no_token_count = 0;
        for (size_t k = 0, start = pos; status == TKI_OK && k < pieces; k++) {
            const size_t len = piece_end[k] - start;
            const uint32_t rank = repeats_previous[k] ? piece_rank[k - 1]
                                                      : tki_hash_probe_located(&hash, where[k], data + start, len);
            piece_rank[k] = rank;
            if (rank != TKI_NONE) { /* a whole token: most pieces of real text */
                if (direct == k) {
                    out[count++] = rank;
                    direct++;
                }
            } else {
                no_token[no_token_count++] = (uint16_t)k;
                if (piece_memo != NULL && len <= TKI_MEMO_PIECE_BYTES) {
                    TKI_PREFETCH(tki_memo_slot_for(piece_memo, where[k]));
                }
            }
            start = piece_end[k];
        }
        /* The pieces that are no token, in order: from the memo, else stepped in lanes. */
        tki_step_lane lanes[TKI_STEP_LANES];
        size_t lane_count = 0, pool_used = 0;
        for (size_t i = 0; status == TKI_OK && i < no_token_count; i++) {
            const size_t k = no_token[i];
            const size_t start = k == 0 ? pos : piece_end[k - 1], len = piece_end[k] - start;
            piece_steps[k] = NOT_STEPPED;
            if (piece_memo != NULL && len <= TKI_MEMO_PIECE_BYTES &&
                tki_memo_find(piece_memo, where[k], data + start, len) != NULL) {
                piece_steps[k] = FOUND_IN_MEMO;
            } else if (lanes_usable && len <= SHORT_PIECE_BYTES) {
                if (pool_used + len + 1 > pool_capacity) {
                    pieces = k;
                    open_at = SIZE_MAX; /* the batch ends before it: the rest is split again */
                    break;
                }
                piece_steps[k] = (uint32_t)pool_used;
                lanes[lane_count].piece = data + start;
                lanes[lane_count].len = len;
                lanes[lane_count].last_forest_id = pool_forest_id + pool_used;
                lanes[lane_count].last_token = pool_token + pool_used;
                pool_used += len + 1;
                if (++lane_count == TKI_STEP_LANES) {
                    status = tki_step_lanes(vocab, lanes, lane_count, engine->flags);
                    lane_count = 0;
                }
            }
        }
        if (status == TKI_OK && lane_count > 0) {
            status = tki_step_lanes(vocab, lanes, lane_count, engine->flags);
        }
        if (direct > 0) {
            last_tokens = 1;
            pos = piece_end[direct - 1];
        }
        for (size_t k = direct; status == TKI_OK && k < pieces; k++) {
            const size_t before = count, len = piece_end[k] - pos;
            const tki_memo_slot *kept = NULL;
            if (piece_rank[k] != TKI_NONE) {
                out[count++] = piece_rank[k];
            } else if (piece_steps[k] == FOUND_IN_MEMO &&
                       (kept = tki_memo_find(piece_memo, where[k], data + pos, len)) != NULL) {
                /* (found again: a piece before it in this pass may have taken its slot) */
                memcpy(out + count, kept->rank, kept->rank_count * sizeof(uint32_t));
                count += kept->rank_count;
            } else if (piece_steps[k] != NOT_STEPPED && piece_steps[k] != FOUND_IN_MEMO) {
                size_t produced = tki_read_back(vocab, pool_token + piece_steps[k], 0, len, 0, 0, 0, 0,
                                                out + count);
                if (produced == SIZE_MAX) {
                    status = TKI_ERR_INTERNAL;
                    break;
                }
                if (piece_memo != NULL && len <= TKI_MEMO_PIECE_BYTES) {
                    tki_memo_store(piece_memo, where[k], data + pos, len, out + count, produced);
                }
                count += produced;
            } else {
                size_t piece_count = count; /* (count itself stays in a register) */
                status = tki_engine_encode_piece(engine, data + pos, len, piece_rank[k], out, &piece_count);
                count = piece_count;
            }
            last_tokens = count - before;
            pos = piece_end[k];
        }
    }
    tki_memo_give_back(vocab, piece_memo);
    *last_piece_tokens = last_tokens;
    *count_io = count;
    *stop = open_at != SIZE_MAX ? open_at : pos;
    return status;
}

int32_t tki_engine_encode(tki_engine *engine, const uint8_t *data, size_t data_len, int final,
                          tki_scan_memo *memo, uint32_t *out, size_t *count, size_t *stop,
                          size_t *last_piece_tokens) {
    *stop = 0;
    if (data_len == 0) {
        return TKI_OK;
    }
    switch (engine->pattern) { /* one copy of the split per pattern and `final`, its tests folded */
    case 0: /* the stretch is one piece: final only at its end */
        if (!final) {
            return TKI_OK;
        }
        {
            size_t before = *count;
            int32_t status = tki_engine_encode_piece(engine, data, data_len, TKI_UNKNOWN_RANK, out, count);
            *last_piece_tokens = *count - before;
            *stop = data_len;
            return status;
        }
    case TKI_PATTERN_R50K:
        return final ? encode_batches(engine, TKI_PATTERN_R50K, 1, data, data_len, memo, out, count, stop,
                                      last_piece_tokens)
                     : encode_batches(engine, TKI_PATTERN_R50K, 0, data, data_len, memo, out, count, stop,
                                      last_piece_tokens);
    case TKI_PATTERN_CL100K:
        return final ? encode_batches(engine, TKI_PATTERN_CL100K, 1, data, data_len, memo, out, count,
                                      stop, last_piece_tokens)
                     : encode_batches(engine, TKI_PATTERN_CL100K, 0, data, data_len, memo, out, count,
                                      stop, last_piece_tokens);
    case TKI_PATTERN_O200K:
        return final ? encode_batches(engine, TKI_PATTERN_O200K, 1, data, data_len, memo, out, count,
                                      stop, last_piece_tokens)
                     : encode_batches(engine, TKI_PATTERN_O200K, 0, data, data_len, memo, out, count,
                                      stop, last_piece_tokens);
    case TKI_PATTERN_COMPILED:
        if (engine->compiled == NULL || engine->scan == NULL) {
            return TKI_ERR_ARGUMENT;
        }
        switch (tki_pattern_builtin_body(engine->compiled)) {
        case TKI_PATTERN_R50K:
            return final ? encode_batches(engine, COMPILED_BODY_OF + TKI_PATTERN_R50K, 1, data, data_len, NULL,
                                          out, count, stop, last_piece_tokens)
                         : encode_batches(engine, COMPILED_BODY_OF + TKI_PATTERN_R50K, 0, data, data_len, memo,
                                          out, count, stop, last_piece_tokens);
        case TKI_PATTERN_CL100K:
            return final ? encode_batches(engine, COMPILED_BODY_OF + TKI_PATTERN_CL100K, 1, data, data_len, NULL,
                                          out, count, stop, last_piece_tokens)
                         : encode_batches(engine, COMPILED_BODY_OF + TKI_PATTERN_CL100K, 0, data, data_len, memo,
                                          out, count, stop, last_piece_tokens);
        case TKI_PATTERN_O200K:
            return final ? encode_batches(engine, COMPILED_BODY_OF + TKI_PATTERN_O200K, 1, data, data_len, NULL,
                                          out, count, stop, last_piece_tokens)
                         : encode_batches(engine, COMPILED_BODY_OF + TKI_PATTERN_O200K, 0, data, data_len, memo,
                                          out, count, stop, last_piece_tokens);
        default:
            break;
        }
        return final ? encode_batches(engine, TKI_PATTERN_COMPILED, 1, data, data_len, NULL, out, count,
                                      stop, last_piece_tokens)
                     : encode_batches(engine, TKI_PATTERN_COMPILED, 0, data, data_len, NULL, out, count,
                                      stop, last_piece_tokens);
    default:
        return TKI_ERR_ARGUMENT;
    }
}

/* ------------------------------------------------------------------ one-shot entry points */

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
    tki_engine engine;
    tki_engine_init(&engine, vocab, 0, flags);
    int32_t status = tki_engine_check(&engine);
    size_t count = 0;
    start = 0;
    for (size_t k = 0; status == TKI_OK && k < piece_count; k++) {
        size_t len = piece_ends[k] - start;
        if (flags & TKI_WHOLE_PIECE_SHORTCUT) {
            status = tki_engine_encode_piece(&engine, data + start, len, TKI_UNKNOWN_RANK, out, &count);
        } else {
            status = tki_engine_encode_piece(&engine, data + start, len, TKI_NONE, out, &count);
        }
        start = piece_ends[k];
    }
    tki_engine_free(&engine);
    if (status == TKI_OK) {
        tki_ranks_to_ids(vocab, out, count);
        *out_count = count;
    }
    return status;
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
    tki_engine engine;
    tki_engine_init(&engine, vocab, pattern, flags);
    int32_t status = tki_engine_check(&engine);
    size_t count = 0, stop = 0, last_piece_tokens = 0;
    if (status == TKI_OK) {
        status = tki_engine_encode(&engine, data, data_len, 1, NULL, out, &count, &stop, &last_piece_tokens);
    }
    tki_engine_free(&engine);
    if (status == TKI_OK) {
        tki_ranks_to_ids(vocab, out, count);
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
    tki_stepper stepper;
    tki_stepper_init(&stepper, vocab, flags);
    int32_t status = tki_stepper_run(&stepper, data, 0, data_len);
    if (status == TKI_OK && data_len > 0) {
        memcpy(out_last_token, stepper.last_token + 1, data_len * sizeof(uint32_t));
        tki_ranks_to_ids(vocab, out_last_token, data_len);
    }
    tki_stepper_free(&stepper);
    return status;
}

/*
 * The prefix pass: theta for every byte end of every piece, the pieces split
 * as one-shot encoding splits them (no whole-piece shortcut: a prefix index
 * wants the plain BPE of every prefix of a piece).  Short pieces go through
 * lanes, sixteen at a time, long ones through a stepper.  A piece's steps
 * depend on its bytes alone, and real text repeats its pieces (" the", " of"):
 * the steps of a piece that is a token are kept by its rank (a direct-mapped
 * memo over an arena) and copied when it comes again, so that most pieces cost
 * a lookup and a copy, as in one-shot encoding, not a step per byte.  The memo
 * grows with the text, a slot per 8 bytes up to 2^16 and a step per byte up to
 * an arena of 2^20 (4.5 MiB in all), and starts afresh when the arena is full.
 * (With a memo of 2^14 slots and 2^18 steps for every text, the index of
 * english.txt with cl100k_base took 274.1M instructions; 249.5M now.)
 *
 * A piece of up to TKI_MEMO_PIECE_BYTES that is no token (a name, a word of
 * another script) is kept in a table of its own, direct-mapped by its slot in
 * the token hash (which the split has computed already), with where it was in
 * the text and its steps in the entry, not in the arena: such pieces are many,
 * and their steps filled the arena and emptied the memo of tokens with it.  It
 * is found again by comparing the bytes there.  A slot per 8 bytes of text up
 * to 2^12 slots of 128 bytes (512 KiB), as many as one-shot encoding's memo.
 */
enum {
    PREFIX_MEMO_MIN_SLOTS = 1 << 10, PREFIX_MEMO_MAX_SLOTS = 1 << 16,
    PREFIX_MEMO_MIN_ARENA = 1 << 12, PREFIX_MEMO_MAX_ARENA = 1 << 20,
    PREFIX_MEMO_PIECE = 32, PREFIX_MEMO_FROM = 4096, PREFIX_MEMO_COPY = 8,
    PREFIX_MEMO_MAX_PIECE_SLOTS = 1 << 12,
    PREFIX_HUGE_OUTPUT = 1 << 21 /* bytes of text from which the output gets huge pages */
};

/* A piece that is no token, kept: where it was in the text, and its steps (two spare, for an
 * entry of 128 bytes; a hit on a piece of up to PREFIX_MEMO_COPY bytes copies that many). */
typedef struct prefix_memo_piece {
    uint64_t start; /* in the text */
    uint32_t len;   /* 0: the slot is empty */
    uint32_t steps[TKI_MEMO_PIECE_BYTES + 2];
} prefix_memo_piece;
_Static_assert(sizeof(prefix_memo_piece) == 128, "a kept piece is 128 bytes");
_Static_assert((int)TKI_MEMO_PIECE_BYTES >= (int)PREFIX_MEMO_COPY, "a hit copies PREFIX_MEMO_COPY steps");

typedef struct prefix_memo {
    uint32_t *rank;            /* by slot: the token whose steps it holds (TKI_NONE: none) */
    uint32_t *offset;          /* by slot: where they are in the arena                      */
    prefix_memo_piece *pieces; /* by hash slot: the pieces that are no token                */
    uint32_t *arena;
    size_t slots;              /* a power of two                                            */
    size_t piece_slots;        /* a power of two, at most slots                             */
    size_t capacity;           /* of the arena                                              */
    size_t used;
} prefix_memo;

static void prefix_memo_free(prefix_memo *memo) {
    free(memo->rank);
    free(memo->offset);
    free(memo->pieces);
    free(memo->arena);
}

/* The memo for a pass over `data_len` bytes (sized as above): none for short texts
 * (or when memory is short). */
static void prefix_memo_init(prefix_memo *memo, size_t data_len) {
    memset(memo, 0, sizeof(*memo));
    if (data_len < PREFIX_MEMO_FROM) {
        return;
    }
    size_t slots = PREFIX_MEMO_MIN_SLOTS;
    while (slots < PREFIX_MEMO_MAX_SLOTS && slots < data_len / 8) {
        slots *= 2;
    }
    size_t capacity = data_len < PREFIX_MEMO_MIN_ARENA   ? PREFIX_MEMO_MIN_ARENA
                      : data_len > PREFIX_MEMO_MAX_ARENA ? PREFIX_MEMO_MAX_ARENA
                                                         : data_len;
    memo->rank = malloc(slots * sizeof(uint32_t));
    memo->offset = malloc(slots * sizeof(uint32_t));
    size_t piece_slots = slots < PREFIX_MEMO_MAX_PIECE_SLOTS ? slots : PREFIX_MEMO_MAX_PIECE_SLOTS;
    memo->pieces = calloc(piece_slots, sizeof(prefix_memo_piece)); /* (len 0: empty) */
    /* (PREFIX_MEMO_COPY more: a hit copies that many steps, whatever its length) */
    memo->arena = tki_table_alloc((capacity + PREFIX_MEMO_COPY) * sizeof(uint32_t)); /* (huge pages) */
    if (memo->rank == NULL || memo->offset == NULL || memo->pieces == NULL || memo->arena == NULL) {
        prefix_memo_free(memo);
        memset(memo, 0, sizeof(*memo));
        return;
    }
    memo->slots = slots;
    memo->piece_slots = piece_slots;
    memo->capacity = capacity;
    memset(memo->rank, 0xFF, slots * sizeof(uint32_t)); /* TKI_NONE everywhere */
}

/* The remembered steps of token `rank`, or NULL. */
static const uint32_t *prefix_memo_find(const prefix_memo *memo, uint32_t rank) {
    if (memo->rank == NULL || rank == TKI_NONE) {
        return NULL;
    }
    size_t slot = rank & (memo->slots - 1);
    return memo->rank[slot] == rank ? memo->arena + memo->offset[slot] : NULL;
}

/* The remembered steps of data[start..start + len), a piece that is no token whose slot in the
 * token hash is hash_slot, or NULL. */
static const uint32_t *prefix_memo_find_piece(const prefix_memo *memo, uint64_t hash_slot, const uint8_t *data,
                                              size_t start, size_t len) {
    if (memo->pieces == NULL || len > TKI_MEMO_PIECE_BYTES) {
        return NULL;
    }
    const prefix_memo_piece *kept = &memo->pieces[hash_slot & (memo->piece_slots - 1)];
    if (kept->len != len || memcmp(data + kept->start, data + start, len) != 0) {
        return NULL;
    }
    return kept->steps;
}

static void prefix_memo_keep(prefix_memo *memo, uint32_t rank, const uint32_t *steps, size_t len) {
    if (memo->rank == NULL || rank == TKI_NONE || len > memo->capacity) {
        return;
    }
    if (memo->used + len > memo->capacity) { /* full: start afresh */
        memset(memo->rank, 0xFF, memo->slots * sizeof(uint32_t));
        memo->used = 0;
    }
    size_t slot = rank & (memo->slots - 1);
    memcpy(memo->arena + memo->used, steps, len * sizeof(uint32_t));
    memo->rank[slot] = rank;
    memo->offset[slot] = (uint32_t)memo->used;
    memo->used += len;
}

/* Keeps the steps of data[start..start + len), a piece that is no token whose slot in the token
 * hash is hash_slot. */
static void prefix_memo_keep_piece(prefix_memo *memo, uint64_t hash_slot, size_t start, const uint32_t *steps,
                                   size_t len) {
    if (memo->pieces == NULL || len == 0 || len > TKI_MEMO_PIECE_BYTES) {
        return;
    }
    prefix_memo_piece *kept = &memo->pieces[hash_slot & (memo->piece_slots - 1)];
    memcpy(kept->steps, steps, len * sizeof(uint32_t));
    kept->start = start;
    kept->len = (uint32_t)len;
}

/* The lanes of a prefix pass, stepped: their steps copied out and kept, by the piece's rank
 * when it is a token (the lane's tag: its rank, or TKI_NONE), else by its slot in the token
 * hash (hash_slot, by lane). */
static int32_t flush_prefix_lanes(const struct tki_vocab *vocab, tki_step_lane *lanes, const uint64_t *hash_slot,
                                  size_t lane_count, uint32_t flags, const uint8_t *data, uint32_t *out,
                                  prefix_memo *memo) {
    int32_t status = tki_step_lanes(vocab, lanes, lane_count, flags);
    for (size_t k = 0; status == TKI_OK && k < lane_count; k++) {
        size_t start = (size_t)(lanes[k].piece - data);
        const uint32_t *steps = lanes[k].last_token + 1;
        memcpy(out + start, steps, lanes[k].len * sizeof(uint32_t));
        if (lanes[k].tag != TKI_NONE) {
            prefix_memo_keep(memo, lanes[k].tag, steps, lanes[k].len);
        } else {
            prefix_memo_keep_piece(memo, hash_slot[k], start, steps, lanes[k].len);
        }
    }
    return status;
}

/*
 * The steps of the threes of a long run of ASCII digits from *pos (see
 * long_digit_run_at), as encode_digit_threes cuts them: a three equal to the
 * one before copies its steps, another takes them from the memo, or steps
 * them and keeps them there.  *pos is moved past the threes.
 */
static int32_t prefix_digit_threes(const tki_vocab *vocab, tki_stepper *stepper, prefix_memo *memo,
                                   const uint8_t *data, size_t data_len, size_t *pos, uint32_t *out) {
    uint32_t previous_key = UINT32_MAX;
    size_t at = *pos;
    int32_t status = TKI_OK;
    for (; tki_three_ascii_digits(data, data_len, at); at += 3) {
        const uint8_t *three = data + at;
        uint32_t key = three[0] | (uint32_t)three[1] << 8 | (uint32_t)three[2] << 16;
        if (key == previous_key) {
            memcpy(out + at, out + at - 3, 3 * sizeof(uint32_t));
            continue;
        }
        uint32_t rank = tki_lookup_rank(vocab, three, 3);
        const uint32_t *known = prefix_memo_find(memo, rank);
        if (known != NULL) {
            memcpy(out + at, known, 3 * sizeof(uint32_t));
        } else {
            tki_stepper_reset(stepper);
            status = tki_stepper_run(stepper, three, 0, 3);
            if (status != TKI_OK) {
                break;
            }
            memcpy(out + at, stepper->last_token + 1, 3 * sizeof(uint32_t));
            prefix_memo_keep(memo, rank, out + at, 3);
        }
        previous_key = key;
    }
    *pos = at;
    return status;
}

/*
 * A long piece stepped straight into the output: the stepper borrows
 * steps[0..len] (steps[0] the entry before the piece's first end, saved and
 * put back) as its array of last tokens, so that its steps, 4 bytes per byte,
 * are not copied (on 4 MiB of spaces, cl100k_base, the copy was most of what
 * the pass cost over one-shot encoding).  The stepper's own array is kept.
 */
static int32_t prefix_long_piece(tki_stepper *stepper, const uint8_t *piece, size_t len, uint32_t *steps) {
    uint32_t *own = stepper->last_token;
    size_t own_capacity = stepper->capacity;
    uint32_t before = steps[0];
    tki_stepper_reset(stepper);
    stepper->last_token = steps;
    stepper->capacity = len + 1;
    steps[0] = TKI_NONE;
    int32_t status = tki_stepper_run(stepper, piece, 0, len);
    stepper->last_token = own;
    stepper->capacity = own_capacity;
    steps[0] = before;
    return status;
}

int32_t tki_prefix_pass(const tki_vocab *vocab, int32_t pattern, const uint8_t *data, size_t data_len,
                        uint32_t flags, uint32_t *out_last_token) {
    if (vocab == NULL || (data_len > 0 && (data == NULL || out_last_token == NULL)) ||
        pattern < 0 || pattern > TKI_PATTERN_O200K) {
        return TKI_ERR_ARGUMENT;
    }
    if (!vocab->incremental || (flags & ~(uint32_t)(TKI_METHOD_LINEAR | TKI_PREFIX_SLOT_BEFORE)) != 0) {
        return TKI_ERR_ARGUMENT;
    }
    int slot_before = (flags & TKI_PREFIX_SLOT_BEFORE) != 0;
    flags &= TKI_METHOD_LINEAR;
    if (data_len >= PREFIX_HUGE_OUTPUT) {
        /* 4 bytes a byte, written once, most often fresh from mmap: faulted in 4 KiB at
         * a time, a 4 MiB text's 16 MiB cost a third of the pass again on a busy host. */
        tki_advise_huge_pages(out_last_token, data_len * sizeof(uint32_t));
    }
    if (pattern == 0 && !(slot_before && data_len > 0)) {
        return tki_prefix_last_tokens(vocab, data, data_len, flags, out_last_token);
    }
    if (pattern == 0) { /* one piece, stepped straight into the output (no copy of its steps) */
        tki_stepper stepper;
        tki_stepper_init(&stepper, vocab, flags);
        int32_t status = prefix_long_piece(&stepper, data, data_len, out_last_token - 1);
        if (status == TKI_OK) {
            tki_ranks_to_ids(vocab, out_last_token, data_len);
        }
        tki_stepper_free(&stepper);
        return status;
    }
    tki_engine engine; /* its split only */
    tki_engine_init(&engine, vocab, pattern, flags);
    const tki_hash_view hash = tki_hash_view_of(vocab);
    size_t piece_end[SPLIT_BATCH];
    tki_hash_probe_state where[SPLIT_BATCH];
    uint8_t repeats_previous[SPLIT_BATCH];
    uint32_t pool_forest_id[SMALL_POOL], pool_token[SMALL_POOL];
    tki_step_lane lanes[TKI_STEP_LANES];
    uint64_t lane_hash_slot[TKI_STEP_LANES];
    size_t lane_count = 0, pool_used = 0;
    tki_stepper stepper;
    tki_stepper_init(&stepper, vocab, flags);
    prefix_memo memo;
    prefix_memo_init(&memo, data_len);
    int digit_threes = pattern == TKI_PATTERN_CL100K || pattern == TKI_PATTERN_O200K;
    int32_t status = TKI_OK;
    size_t pos = 0;
    while (status == TKI_OK && pos < data_len) {
        if (digit_threes && long_digit_run_at(data, data_len, pos)) { /* (split_batch stops before one) */
            status = prefix_digit_threes(vocab, &stepper, &memo, data, data_len, &pos, out_last_token);
            continue;
        }
        size_t open_at = SIZE_MAX, pieces = 0;
        /* Split a batch and start its lookups (one copy of the split per pattern, as encode_batches). */
        switch (pattern) {
        case TKI_PATTERN_R50K:
            pieces = split_batch(&engine, TKI_PATTERN_R50K, 1, data, data_len, pos, NULL, &hash, piece_end, where,
                                 repeats_previous, &open_at, &status);
            break;
        case TKI_PATTERN_CL100K:
            pieces = split_batch(&engine, TKI_PATTERN_CL100K, 1, data, data_len, pos, NULL, &hash, piece_end, where,
                                 repeats_previous, &open_at, &status);
            break;
        default:
            pieces = split_batch(&engine, TKI_PATTERN_O200K, 1, data, data_len, pos, NULL, &hash, piece_end, where,
                                 repeats_previous, &open_at, &status);
            break;
        }
        if (pieces == 0 && status == TKI_OK) { /* a long run of digits (split_batch leaves it to encode) */
            size_t end = tki_pretokenize_next(pattern, data, data_len, pos);
            piece_end[0] = end;
            where[0] = tki_hash_locate(vocab, data + pos, end - pos, data_len - pos);
            repeats_previous[0] = 0;
            pieces = 1;
        }
        uint32_t previous_rank = TKI_NONE;
        for (size_t k = 0; status == TKI_OK && k < pieces; k++) {
            size_t len = piece_end[k] - pos;
            uint32_t rank = repeats_previous[k] ? previous_rank
                                                : len <= vocab->max_token_bytes
                                                      ? tki_hash_probe(vocab, where[k], data + pos, len)
                                                      : TKI_NONE;
            previous_rank = rank;
            /* (a piece of up to TKI_MEMO_PIECE_BYTES has been located: where[k].slot is its slot) */
            const uint32_t *known = len > PREFIX_MEMO_PIECE ? NULL
                                    : rank != TKI_NONE  ? prefix_memo_find(&memo, rank)
                                                        : prefix_memo_find_piece(&memo, where[k].slot, data, pos, len);
            if (known != NULL) {
                if (len <= PREFIX_MEMO_COPY && data_len - pos >= PREFIX_MEMO_COPY) {
                    /* A fixed copy, not a loop whose end the branch predictor misses
                     * (on English, a third of the pass's mispredicted branches).  The
                     * steps past len belong to the pieces that follow, all written
                     * after this one. */
                    memcpy(out_last_token + pos, known, PREFIX_MEMO_COPY * sizeof(uint32_t));
                } else {
                    memcpy(out_last_token + pos, known, len * sizeof(uint32_t));
                }
            } else if (len + 1 <= SMALL_POOL && len <= SHORT_PIECE_BYTES) {
                if (lane_count == TKI_STEP_LANES || pool_used + len + 1 > SMALL_POOL) {
                    status = flush_prefix_lanes(vocab, lanes, lane_hash_slot, lane_count, flags, data, out_last_token,
                                                &memo);
                    lane_count = 0;
                    pool_used = 0;
                }
                lanes[lane_count].piece = data + pos;
                lanes[lane_count].len = len;
                lanes[lane_count].last_forest_id = pool_forest_id + pool_used;
                lanes[lane_count].last_token = pool_token + pool_used;
                lanes[lane_count].tag = len <= PREFIX_MEMO_PIECE ? rank : TKI_NONE;
                lane_hash_slot[lane_count] = where[k].slot;
                pool_used += len + 1;
                lane_count++;
            } else if (pos > 0 || slot_before) {
                status = prefix_long_piece(&stepper, data + pos, len, out_last_token + pos - 1);
            } else {
                tki_stepper_reset(&stepper);
                status = tki_stepper_run(&stepper, data + pos, 0, len);
                if (status == TKI_OK) {
                    memcpy(out_last_token + pos, stepper.last_token + 1, len * sizeof(uint32_t));
                }
            }
            pos = piece_end[k];
        }
    }
    if (status == TKI_OK && lane_count > 0) {
        status = flush_prefix_lanes(vocab, lanes, lane_hash_slot, lane_count, flags, data, out_last_token, &memo);
    }
    if (status == TKI_OK) {
        tki_ranks_to_ids(vocab, out_last_token, data_len);
    }
    prefix_memo_free(&memo);
    tki_stepper_free(&stepper);
    tki_engine_free(&engine);
    return status;
}
