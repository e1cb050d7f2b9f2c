/*
 * stream.c — encoding text as it arrives, with eager output.
 *
 * Within a piece, the step of step.h runs byte by byte.  A token of the final
 * result is certain once no continuation can change it.  With d the depth of
 * the automaton state, any token that will ever cover the current end starts
 * in the last d bytes, so the final result passes through one of the prefix
 * ends in [n - d, n] (the candidates).  The prefix ends form a tree (the
 * parent of end i is i - |theta(i)|); we keep the candidates and their
 * ancestors alive with a count of live children each.  When the window start
 * n - d moves past an end with no live children, the end dies and its parent
 * loses a child, cascading.  Emission: while the last emitted boundary b lies
 * before the window and has exactly one live child c, emit theta(c) and move
 * b to c.  Each end is born and dies once: O(1) amortized per byte on top of
 * the step.  Memory: the ends from min(b, n - t) to n, t the longest token.
 *
 * With a pre-split pattern, pieces are cut by tki_pretokenize_match_ex.  A
 * match that never looked at the end of the pending text is final.  Else only
 * its first bytes are certain: the least end the match takes under every
 * one-character continuation ("probes": one character of each class the
 * patterns tell apart) and under the end of input.  Those bytes are pushed
 * into the piece (and emitted eagerly); the rest wait.  Scans that ran into
 * the end are resumed, not repeated, so a long run costs O(1) per byte.
 *
 * A vocabulary that is not incremental gets no eager output: each piece is
 * held whole and encoded with the heap BPE when it is final.  A vocabulary
 * with non-canonical tokens (reachable only through tiktoken's whole-piece
 * shortcut) holds a piece until it is longer than the longest of them, or
 * final: a final piece that is itself a token is that token.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "step.h"

struct tki_stream {
    const struct tki_vocab *vocab;
    int32_t pattern;      /* TKI_PATTERN_*, or 0: the whole input is one piece */
    uint32_t flags;

    /* The piece being encoded: its prefix ends 0..length. */
    uint32_t state;
    uint64_t length;       /* n                                     */
    uint64_t emitted;      /* b: the last emitted boundary          */
    uint64_t window_start; /* n - depth(state)                      */
    uint64_t base;         /* the prefix end held in slot 0         */
    size_t capacity;       /* slots                                 */
    uint32_t *last_forest_id;
    uint32_t *last_token;
    uint32_t *live_children;
    uint8_t *alive;

    /* Text not yet final: the current piece starts at text_start. */
    uint8_t *text;
    size_t text_start;
    size_t text_end;
    size_t text_capacity;
    size_t piece_fed;      /* bytes of the current piece pushed into the piece state */
    tki_scan_memo memo;

    tki_heap_workspace heap; /* for a vocabulary that is not incremental */
    uint32_t *heap_out;
    size_t heap_out_capacity;

    uint64_t bytes_fed;
    uint64_t tokens_emitted;
    uint64_t max_pending;
};

typedef struct output {
    uint32_t *ids;
    size_t capacity;
    size_t count;
} output;

static int32_t emit(tki_stream *stream, output *out, uint32_t id) {
    if (out->count >= out->capacity) {
        return TKI_ERR_ARGUMENT; /* the caller sized the buffer from tki_stream_pending */
    }
    out->ids[out->count++] = id;
    stream->tokens_emitted++;
    return TKI_OK;
}

static size_t slot_of(const tki_stream *stream, uint64_t position) {
    return (size_t)(position - stream->base);
}

static void piece_reset(tki_stream *stream) {
    stream->state = 0;
    stream->length = 0;
    stream->emitted = 0;
    stream->window_start = 0;
    stream->base = 0;
    if (stream->capacity > 0) {
        stream->last_forest_id[0] = 0;
        stream->last_token[0] = TKI_NONE;
        stream->live_children[0] = 0;
        stream->alive[0] = 1;
    }
}

static int32_t grow_slots(tki_stream *stream, size_t capacity) {
    uint32_t *forest = realloc(stream->last_forest_id, capacity * sizeof(uint32_t));
    if (forest != NULL) {
        stream->last_forest_id = forest;
    }
    uint32_t *tokens = realloc(stream->last_token, capacity * sizeof(uint32_t));
    if (tokens != NULL) {
        stream->last_token = tokens;
    }
    uint32_t *children = realloc(stream->live_children, capacity * sizeof(uint32_t));
    if (children != NULL) {
        stream->live_children = children;
    }
    uint8_t *alive = realloc(stream->alive, capacity);
    if (alive != NULL) {
        stream->alive = alive;
    }
    if (forest == NULL || tokens == NULL || children == NULL || alive == NULL) {
        return TKI_ERR_NOMEM; /* the arrays that did grow are kept; capacity is unchanged */
    }
    stream->capacity = capacity;
    return TKI_OK;
}

/* Makes room for prefix end length + 1, dropping ends no step will read again. */
static int32_t reserve_next_slot(tki_stream *stream) {
    uint64_t next = stream->length + 1;
    if (next - stream->base < stream->capacity) {
        return TKI_OK;
    }
    uint64_t longest = stream->vocab->max_token_bytes;
    uint64_t keep_from = stream->emitted;
    if (stream->length > longest && stream->length - longest < keep_from) {
        keep_from = stream->length - longest;
    } else if (stream->length <= longest) {
        keep_from = 0;
    }
    if (keep_from > stream->base && (keep_from - stream->base) * 2 >= stream->capacity) {
        size_t shift = (size_t)(keep_from - stream->base);
        size_t kept = (size_t)(stream->length - keep_from + 1);
        memmove(stream->last_forest_id, stream->last_forest_id + shift, kept * sizeof(uint32_t));
        memmove(stream->last_token, stream->last_token + shift, kept * sizeof(uint32_t));
        memmove(stream->live_children, stream->live_children + shift, kept * sizeof(uint32_t));
        memmove(stream->alive, stream->alive + shift, kept);
        stream->base = keep_from;
        return TKI_OK;
    }
    return grow_slots(stream, stream->capacity * 2);
}

/* An end leaves the live set; its parent may follow. */
static void kill_end(tki_stream *stream, uint64_t end) {
    for (;;) {
        size_t slot = slot_of(stream, end);
        stream->alive[slot] = 0;
        if (end == 0) {
            return;
        }
        uint64_t parent = end - stream->vocab->rule[stream->last_token[slot]].length;
        size_t parent_slot = slot_of(stream, parent);
        stream->live_children[parent_slot]--;
        if (stream->live_children[parent_slot] != 0 || parent >= stream->window_start ||
            parent == stream->emitted) {
            return;
        }
        end = parent;
    }
}

static int32_t piece_push(tki_stream *stream, uint8_t byte, output *out) {
    const struct tki_vocab *vocab = stream->vocab;
    int32_t status = reserve_next_slot(stream);
    if (status != TKI_OK) {
        return status;
    }
    uint64_t length = stream->length + 1;
    stream->state = tki_automaton_next(vocab, stream->state, byte);
    tki_prefetch_after_row(vocab, stream->state);
    uint32_t theta = tki_step_theta(vocab, tki_state_tau(vocab, stream->state), stream->state,
                                    stream->last_forest_id, slot_of(stream, length), length,
                                    stream->flags);
    if (theta == TKI_NONE) {
        return TKI_ERR_INTERNAL;
    }
    size_t slot = slot_of(stream, length);
    stream->last_forest_id[slot] = vocab->rule[theta].forest_in;
    stream->last_token[slot] = theta;
    stream->live_children[slot] = 0;
    stream->alive[slot] = 1;
    stream->live_children[slot_of(stream, length - vocab->rule[theta].length)]++;
    stream->length = length;

    uint64_t window_start = length - tki_state_depth(vocab, stream->state);
    for (uint64_t end = stream->window_start; end < window_start; end++) {
        size_t end_slot = slot_of(stream, end);
        if (stream->alive[end_slot] && stream->live_children[end_slot] == 0 &&
            end != stream->emitted) {
            stream->window_start = end + 1; /* so the cascade treats `end` as outside */
            kill_end(stream, end);
        }
    }
    stream->window_start = window_start;

    while (stream->emitted < window_start &&
           stream->live_children[slot_of(stream, stream->emitted)] == 1) {
        uint64_t child = stream->emitted + 1;
        while (!stream->alive[slot_of(stream, child)]) {
            child++; /* the ends between b and its one live child are all dead */
        }
        status = emit(stream, out, stream->last_token[slot_of(stream, child)]);
        if (status != TKI_OK) {
            return status;
        }
        stream->emitted = child;
    }
    return TKI_OK;
}

/* Emits the rest of the piece (the path from b to n) and starts a new one. */
static int32_t piece_finish(tki_stream *stream, output *out) {
    const struct tki_vocab *vocab = stream->vocab;
    size_t first = out->count;
    for (uint64_t end = stream->length; end > stream->emitted;) {
        uint32_t token = stream->last_token[slot_of(stream, end)];
        uint32_t length = vocab->rule[token].length;
        if (length > end - stream->emitted) {
            return TKI_ERR_INTERNAL; /* the path must pass through b */
        }
        int32_t status = emit(stream, out, token);
        if (status != TKI_OK) {
            return status;
        }
        end -= length;
    }
    for (size_t i = first, j = out->count; i + 1 < j; i++, j--) {
        uint32_t swap = out->ids[i];
        out->ids[i] = out->ids[j - 1];
        out->ids[j - 1] = swap;
    }
    piece_reset(stream);
    return TKI_OK;
}

static int32_t push_bytes(tki_stream *stream, const uint8_t *bytes, size_t len, output *out) {
    for (size_t i = 0; i < len; i++) {
        int32_t status = piece_push(stream, bytes[i], out);
        if (status != TKI_OK) {
            return status;
        }
        uint64_t pending = stream->length - stream->emitted;
        if (pending > stream->max_pending) {
            stream->max_pending = pending;
        }
    }
    return TKI_OK;
}

/* A final piece of a vocabulary that is not incremental: heap BPE. */
static int32_t encode_held_piece(tki_stream *stream, const uint8_t *piece, size_t len,
                                 output *out) {
    if (len == 0) {
        return TKI_OK;
    }
    uint32_t rank = tki_lookup_rank(stream->vocab, piece, len);
    if (rank != TKI_NONE) {
        return emit(stream, out, rank);
    }
    if (len > stream->heap.capacity) {
        tki_heap_workspace_free(&stream->heap);
        int32_t status = tki_heap_workspace_init(&stream->heap, len);
        if (status != TKI_OK) {
            return status;
        }
        uint32_t *ids = realloc(stream->heap_out, len * sizeof(uint32_t));
        if (ids == NULL) {
            return TKI_ERR_NOMEM;
        }
        stream->heap_out = ids;
        stream->heap_out_capacity = len;
    }
    size_t count = 0;
    int32_t status = tki_heap_bpe(stream->vocab, &stream->heap, piece, len, stream->heap_out,
                                  &count, NULL);
    for (size_t i = 0; status == TKI_OK && i < count; i++) {
        status = emit(stream, out, stream->heap_out[i]);
    }
    return status;
}

static int32_t reserve_text(tki_stream *stream, size_t more) {
    if (stream->text_start > 0 && stream->text_start * 2 >= stream->text_end) {
        size_t pending = stream->text_end - stream->text_start;
        memmove(stream->text, stream->text + stream->text_start, pending);
        stream->text_start = 0;
        stream->text_end = pending;
    }
    if (more > SIZE_MAX - stream->text_end - 8) {
        return TKI_ERR_NOMEM;
    }
    size_t needed = stream->text_end + more + 8; /* 8: room for a probe character */
    if (needed <= stream->text_capacity) {
        return TKI_OK;
    }
    size_t capacity = stream->text_capacity * 2 > needed ? stream->text_capacity * 2 : needed;
    uint8_t *text = realloc(stream->text, capacity);
    if (text == NULL) {
        return TKI_ERR_NOMEM;
    }
    stream->text = text;
    stream->text_capacity = capacity;
    return TKI_OK;
}

/* One character of each class the built-in patterns tell apart. */
static const char *const probe_characters[] = {
    "a", "A", "0", " ", "\n", "\r", "\t", "!", "'", "/", "s", "t", "e", "l", "v", "r", "d",
    "m", "S", "T", "E", "L", "V", "R", "D", "M", "x",
    "\xc3\xa9",         /* e-acute: Ll          */
    "\xcc\x81",         /* combining acute: Mn  */
    "\xc7\x85",         /* Dz digraph: Lt       */
    "\xca\xb0",         /* modifier h: Lm       */
    "\xe4\xb8\xad",     /* CJK: Lo              */
    "\xc2\xa0",         /* no-break space       */
    "\xc2\xb2",         /* superscript two: No  */
    "\xe2\x80\xa8",     /* line separator       */
    "\xc5\xbf",         /* long s               */
    "\xc3\x80",         /* A-grave: Lu          */
    "\xe2\x82\xac",     /* euro sign: Sc        */
};

/*
 * Length of data without a trailing UTF-8 sequence that more bytes could
 * still complete (a lead byte followed by fewer continuation bytes than it
 * announces).  Matching stops there: what the cut character will be is not
 * known yet, and the probes stand for it.
 */
static size_t complete_length(const uint8_t *data, size_t len) {
    for (size_t back = 1; back <= 3 && back <= len; back++) {
        uint8_t byte = data[len - back];
        if ((byte & 0xC0) == 0x80) {
            continue; /* a continuation byte: look further back for the lead */
        }
        size_t needed = byte >= 0xC2 && byte < 0xE0 ? 2 : byte >= 0xE0 && byte < 0xF0 ? 3
                      : byte >= 0xF0 && byte < 0xF5 ? 4 : 1;
        return needed > back ? len - back : len;
    }
    return len;
}

/* The bytes of the current (unfinished) piece that every continuation keeps in it. */
static size_t certain_length(tki_stream *stream, size_t pending, size_t tentative_end) {
    uint8_t *piece = stream->text + stream->text_start;
    size_t certain = tentative_end;
    uint8_t saved[8];
    memcpy(saved, piece + pending, sizeof(saved)); /* the cut character's bytes, if any */
    for (size_t p = 0; p < sizeof(probe_characters) / sizeof(probe_characters[0]); p++) {
        size_t probe_length = strlen(probe_characters[p]);
        memcpy(piece + pending, probe_characters[p], probe_length); /* room reserved */
        size_t end = tki_pretokenize_match_ex(stream->pattern, piece, pending + probe_length, 0,
                                              &stream->memo, 0, NULL);
        if (end < certain) {
            certain = end;
        }
    }
    memcpy(piece + pending, saved, sizeof(saved));
    return certain;
}

/*
 * The rank of a whole piece that may be a non-canonical token (one no BPE
 * builds, reachable only through tiktoken's whole-piece shortcut), or TKI_NONE.
 */
static uint32_t non_canonical_rank(const tki_stream *stream, const uint8_t *piece, size_t len) {
    if (len > stream->vocab->longest_noncanonical) {
        return TKI_NONE;
    }
    return tki_lookup_rank(stream->vocab, piece, len);
}

/* Cuts and encodes what is final; with at_end, everything. */
static int32_t drive(tki_stream *stream, int at_end, output *out) {
    int incremental = stream->vocab->incremental;
    if (stream->pattern == 0 && incremental && stream->text_end > stream->text_start) {
        /* The held head of a one-piece input (see tki_stream_feed). */
        uint8_t *head = stream->text + stream->text_start;
        size_t held = stream->text_end - stream->text_start;
        int32_t status = TKI_OK;
        uint32_t rank = at_end ? non_canonical_rank(stream, head, held) : TKI_NONE;
        if (rank != TKI_NONE) {
            stream->text_start = stream->text_end = 0;
            return emit(stream, out, rank);
        }
        if (at_end || held > stream->vocab->longest_noncanonical) {
            status = push_bytes(stream, head, held, out);
            stream->text_start = stream->text_end = 0;
        }
        if (status != TKI_OK || !at_end) {
            return status;
        }
    }
    if (stream->pattern == 0) {
        if (!incremental && at_end) {
            /* (Nothing fed: text is still NULL, and NULL + 0 is undefined.) */
            int32_t status = stream->text_end == stream->text_start
                                 ? TKI_OK
                                 : encode_held_piece(stream, stream->text + stream->text_start,
                                                     stream->text_end - stream->text_start, out);
            stream->text_start = stream->text_end = 0;
            return status;
        }
        return at_end && incremental ? piece_finish(stream, out) : TKI_OK;
    }
    while (stream->text_start < stream->text_end) {
        uint8_t *piece = stream->text + stream->text_start;
        size_t pending = stream->text_end - stream->text_start;
        if (!at_end) {
            pending = complete_length(piece, pending);
            if (pending == 0) {
                return TKI_OK; /* only part of a character: wait for the rest */
            }
        }
        int touched_end = 0;
        size_t end = tki_pretokenize_match_ex(stream->pattern, piece, pending, 0, &stream->memo, 1,
                                              &touched_end);
        if (end == 0 || end > pending) {
            return TKI_ERR_INTERNAL;
        }
        int32_t status = TKI_OK;
        if (at_end || !touched_end) {
            /*
             * A final piece not yet begun that is itself a token is that token
             * (tiktoken's whole-piece shortcut): one lookup instead of a step
             * per byte, for most pieces of real text.
             */
            uint32_t rank = incremental && stream->piece_fed == 0
                                ? tki_lookup_rank(stream->vocab, piece, end) : TKI_NONE;
            if (rank != TKI_NONE) {
                status = emit(stream, out, rank);
            } else if (incremental) {
                status = push_bytes(stream, piece + stream->piece_fed, end - stream->piece_fed, out);
                if (status == TKI_OK) {
                    status = piece_finish(stream, out);
                }
            } else {
                status = encode_held_piece(stream, piece, end, out);
            }
            stream->text_start += end;
            stream->piece_fed = 0;
            stream->memo.count = 0;
            if (status != TKI_OK) {
                return status;
            }
            continue;
        }
        if (incremental) {
            size_t certain = certain_length(stream, pending, end);
            if (stream->piece_fed == 0 && certain <= stream->vocab->longest_noncanonical) {
                return status; /* it may yet be a non-canonical token: hold it */
            }
            if (certain > stream->piece_fed) {
                status = push_bytes(stream, piece + stream->piece_fed, certain - stream->piece_fed,
                                    out);
                stream->piece_fed = certain;
            }
        }
        return status;
    }
    stream->text_start = stream->text_end = 0;
    return TKI_OK;
}

int32_t tki_stream_new(const tki_vocab *vocab, int32_t pattern, uint32_t flags,
                       tki_stream **out_stream) {
    if (vocab == NULL || out_stream == NULL || pattern < 0 || pattern > TKI_PATTERN_O200K ||
        (flags & ~(uint32_t)TKI_METHOD_LINEAR) != 0) {
        return TKI_ERR_ARGUMENT;
    }
    *out_stream = NULL;
    tki_stream *stream = calloc(1, sizeof(*stream));
    if (stream == NULL) {
        return TKI_ERR_NOMEM;
    }
    stream->vocab = vocab;
    stream->pattern = pattern;
    stream->flags = flags;
    if (vocab->incremental && grow_slots(stream, 256) != TKI_OK) {
        tki_stream_free(stream);
        return TKI_ERR_NOMEM;
    }
    piece_reset(stream);
    *out_stream = stream;
    return TKI_OK;
}

void tki_stream_free(tki_stream *stream) {
    if (stream == NULL) {
        return;
    }
    free(stream->last_forest_id);
    free(stream->last_token);
    free(stream->live_children);
    free(stream->alive);
    free(stream->text);
    free(stream->heap_out);
    if (stream->heap.capacity > 0) {
        tki_heap_workspace_free(&stream->heap);
    }
    free(stream);
}

uint64_t tki_stream_pending(const tki_stream *stream) {
    if (stream == NULL) {
        return 0;
    }
    return (uint64_t)(stream->text_end - stream->text_start - stream->piece_fed) +
           (stream->length - stream->emitted);
}

int32_t tki_stream_feed(tki_stream *stream, const uint8_t *data, size_t len, uint32_t *out,
                        size_t out_capacity, size_t *out_count) {
    if (stream == NULL || out_count == NULL || (data == NULL && len > 0) ||
        (out == NULL && out_capacity > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    output result = {out, out_capacity, 0};
    *out_count = 0;
    int32_t status = TKI_OK;
    stream->bytes_fed += len;
    int hold_head = stream->vocab->longest_noncanonical > 0 && stream->length == 0;
    if (stream->pattern == 0 && stream->vocab->incremental && !hold_head) {
        status = push_bytes(stream, data, len, &result);
    } else {
        status = reserve_text(stream, len);
        if (status == TKI_OK) {
            memcpy(stream->text + stream->text_end, data, len);
            stream->text_end += len;
            status = drive(stream, 0, &result);
        }
    }
    uint64_t pending = tki_stream_pending(stream);
    if (pending > stream->max_pending) {
        stream->max_pending = pending;
    }
    *out_count = result.count;
    return status;
}

int32_t tki_stream_finish(tki_stream *stream, uint32_t *out, size_t out_capacity,
                          size_t *out_count) {
    if (stream == NULL || out_count == NULL || (out == NULL && out_capacity > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    output result = {out, out_capacity, 0};
    int32_t status = drive(stream, 1, &result);
    *out_count = result.count;
    return status;
}

void tki_stream_get_stats(const tki_stream *stream, tki_stream_stats *out_stats) {
    if (stream == NULL || out_stats == NULL) {
        return;
    }
    memset(out_stats, 0, sizeof(*out_stats));
    out_stats->bytes_fed = stream->bytes_fed;
    out_stats->tokens_emitted = stream->tokens_emitted;
    out_stats->pending_bytes = tki_stream_pending(stream);
    out_stats->max_pending_bytes = stream->max_pending;
    uint64_t live = 0;
    for (uint64_t end = stream->emitted; end <= stream->length && stream->capacity > 0; end++) {
        live += stream->alive[slot_of(stream, end)];
    }
    out_stats->live_ends = live;
}

int32_t tki_encode_bounded(const tki_vocab *vocab, int32_t pattern, const uint8_t *data,
                           size_t data_len, uint64_t max_tokens, uint32_t *out,
                           uint64_t *out_count, size_t *out_consumed, int32_t *out_exceeded) {
    /*
     * A stream over the input, fed a block at a time, so that what is read
     * stops as soon as max_tokens + 1 ids are certain: the work is the bytes
     * up to that point plus the unresolved window, not the input.
     */
    enum { BLOCK = 1 << 16 };
    if (vocab == NULL || out_count == NULL || out_consumed == NULL || out_exceeded == NULL ||
        (data == NULL && data_len > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    *out_count = 0;
    *out_consumed = 0;
    *out_exceeded = 0;
    tki_stream *stream = NULL;
    int32_t status = tki_stream_new(vocab, pattern, 0, &stream);
    uint32_t *ids = NULL;
    size_t ids_capacity = 0;
    uint64_t count = 0;
    size_t consumed = 0;
    int finished = 0;
    while (status == TKI_OK && !finished) {
        size_t block = data_len - consumed < BLOCK ? data_len - consumed : BLOCK;
        finished = block == 0;
        uint64_t pending = tki_stream_pending(stream);
        if (pending > SIZE_MAX / sizeof(uint32_t) - BLOCK - 1) {
            status = TKI_ERR_NOMEM;
            break;
        }
        size_t needed = (size_t)pending + block + 1;
        if (needed > ids_capacity) {
            uint32_t *grown = realloc(ids, needed * sizeof(uint32_t));
            if (grown == NULL) {
                status = TKI_ERR_NOMEM;
                break;
            }
            ids = grown;
            ids_capacity = needed;
        }
        size_t produced = 0;
        status = finished ? tki_stream_finish(stream, ids, ids_capacity, &produced)
                          : tki_stream_feed(stream, data + consumed, block, ids, ids_capacity,
                                            &produced);
        consumed += block;
        for (size_t i = 0; status == TKI_OK && i < produced; i++) {
            if (out != NULL && count <= max_tokens) {
                out[count] = ids[i];
            }
            count++;
        }
        if (count > max_tokens) {
            *out_exceeded = 1;
            break;
        }
    }
    free(ids);
    tki_stream_free(stream);
    if (status == TKI_OK) {
        *out_count = count > max_tokens ? max_tokens + 1 : count;
        *out_consumed = consumed;
    }
    return status;
}
