/*
 * stream.c — the engine fed text in chunks, with eager output; special tokens
 * found as the text arrives; and the bounded calls (count, cap, truncate),
 * which are a stream fed from a whole text until enough ids are certain.
 *
 * A stream holds the text it has not finished with: the open piece (the one
 * whose extent more text may still change) and what follows it.  Each call
 *   1. validates the new bytes as UTF-8 (unless the caller vouches for them)
 *      and appends them;
 *   2. looks for special tokens that are certain: an occurrence at s is
 *      certain once no string can still start before s or at s and reach past
 *      the text (a tail that is a proper prefix of an allowed string is held
 *      back).  A refused string fails the stream; an allowed one ends the
 *      stretch before it (tiktoken encodes the text between specials apart)
 *      and gives its id;
 *   3. gives the stretch's text to the engine (encode.c), which encodes every
 *      piece that is final in batches, exactly as a one-shot call does, and
 *      stops at the open piece;
 *   4. takes the open piece on eagerly: its bytes that every continuation
 *      keeps in it (certain_length) are stepped (steps.c), and the tokens up
 *      to the certain end of its steps (tki_stepper_certain_end) come out.
 * Without a pattern (pattern 0) a stretch is one piece, stepped as its bytes
 * come; only the bytes a step may still read back are kept.  A vocabulary
 * that is not incremental holds each piece until it is final (heap BPE).  One
 * with non-canonical tokens (reachable only through tiktoken's whole-piece
 * shortcut) holds a piece until it is longer than the longest of them.
 *
 * Deciding what is certain costs per call, not per byte: the engine stops at
 * the first piece whose match depended on the end of the text, certain_length
 * matches the open piece once per probe character (its scans resume through
 * the memo), and the certain end is one walk over the unresolved window.
 *
 * A stream is for one thread at a time: a call that finds it in use returns
 * TKI_ERR_BUSY and changes nothing.  After any other error the stream has
 * failed: every later call returns TKI_ERR_STREAM_FAILED, and
 * tki_stream_get_error tells the first error.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The state of the UTF-8 check between chunks. */
typedef struct utf8_check {
    uint32_t needed;       /* continuation bytes still to come (0: between characters) */
    uint8_t low, high;     /* the range the next continuation byte must be in          */
    uint8_t lead;          /* the first byte of the character under way                */
    uint64_t lead_offset;  /* its offset in the stream                                  */
} utf8_check;

/*
 * The probes' answer for an open piece that is one character repeated (see
 * certain_length): the piece at stream offset `piece_start` is `character`
 * repeated through run_end (its offset in the piece), unless `broken`; the
 * probes last ran at pending `probed_at` and their least end was
 * `probed_end` (both offsets in the piece; valid when probed_at > 0);
 * `matched_whole`: the pre-tokenizer's match of the run, with the text ending
 * there, was the whole run and touched the end (so it is at every length).
 */
typedef struct run_probes {
    uint64_t piece_start;
    uint8_t character[4];
    uint32_t character_length;   /* 0: not read yet                           */
    int32_t broken;              /* another character follows the run          */
    int32_t matched_whole;
    size_t run_end;
    size_t probed_at, probed_end;
} run_probes;

struct tki_stream {
    const struct tki_vocab *vocab;
    int32_t pattern;                      /* TKI_PATTERN_*, TKI_PATTERN_COMPILED, or 0: a
                                             stretch is one piece                         */
    const tki_pattern *compiled;          /* TKI_PATTERN_COMPILED: the pattern             */
    uint32_t flags;
    const tki_special_matcher *allowed;   /* NULL: none                                  */
    const tki_special_matcher *refused;   /* NULL: none                                  */
    atomic_int busy;
    int32_t failure;                      /* TKI_OK, or the error that ended the stream  */
    tki_stream_error error;

    tki_engine engine;                    /* the final pieces                            */

    /* The text not finished with: text[text_start..text_end) (8 spare bytes after), or,
     * in a bounded call, the caller's text itself (borrowed: read, never written; the
     * stream's own buffer is `owned` then, and takes a piece's copy for its probes). */
    uint8_t *text;
    size_t text_start, text_end, text_capacity;
    int32_t borrowed, own_next;           /* own_next: copy the text from the next block */
    uint8_t *owned;
    size_t owned_capacity;
    uint64_t text_base;                   /* stream offset of text[0]                    */
    size_t allowed_from, refused_from;    /* where the searches for specials go on       */

    /* The open piece starts at text[text_start] (pattern 0: holds its byte piece_from; with a
     * pattern, its byte run_dropped: the bytes before are its run's character again). */
    tki_stepper piece;                    /* its certain bytes, stepped                  */
    uint64_t piece_from;
    size_t run_dropped;
    uint64_t emitted;                     /* its prefix end up to which ids came out     */
    tki_scan_memo memo;                   /* the pre-tokenizer's scans of it             */
    run_probes run;                       /* the probes' answer while it is one character */
    tki_pattern_scan scan;                /*   (a compiled pattern's)                      */
    uint64_t finished_start, finished_end;/* the last open piece that became final       */

    utf8_check utf8;
    uint64_t bytes_fed;
    uint64_t tokens_emitted;
    uint64_t max_pending;
};

/*
 * Where the specials are among a bounded run's ids (truncate, which finds an
 * id's bytes from the vocabulary, and a special's here): ascending, the index
 * in the call's output while the call writes it, in the run's ids after.
 */
typedef struct special_place {
    uint64_t index;
    uint64_t length;
} special_place;

typedef struct special_log {
    special_place *places;
    size_t count, capacity;
} special_log;

/* Where ids go: ids[count..capacity); specials (if not NULL) notes where the specials go. */
typedef struct output {
    uint32_t *ids;
    special_log *specials;
    size_t capacity;
    size_t count;
} output;

static size_t special_length(const tki_special_matcher *matcher, uint32_t string);

/* ------------------------------------------------------------------ UTF-8 */

enum { UTF8_INVALID_START = 1, UTF8_INVALID_CONTINUATION = 2, UTF8_UNEXPECTED_END = 3 };

static void utf8_fail(tki_stream *stream, uint64_t offset, uint8_t byte, uint32_t reason) {
    stream->error.offset = offset;
    stream->error.byte = byte;
    stream->error.reason = reason;
}

/*
 * Checks data[0..len) as the continuation of the bytes checked before (a
 * character may be cut between chunks), as CPython's UTF-8 decoder does:
 * overlong forms, surrogates and code points past U+10FFFF are errors, which
 * are reported at the start of the bad sequence.  `offset`: the stream offset
 * of data[0].
 */
static int32_t utf8_check_bytes(tki_stream *stream, const uint8_t *data, size_t len, uint64_t offset) {
    utf8_check check = stream->utf8;
    size_t i = 0;
    while (i < len) {
        if (check.needed == 0) {
            /* Between characters: whole ones at a time, then the rest a byte at a time. */
            i += tki_utf8_whole_prefix(data + i, len - i);
            if (i == len) {
                break;
            }
            uint8_t byte = data[i];
            if (byte < 0x80) {
                i++;
                continue;
            }
            check.lead = byte;
            check.lead_offset = offset + i;
            check.low = 0x80;
            check.high = 0xBF;
            if (byte >= 0xC2 && byte <= 0xDF) {
                check.needed = 1;
            } else if (byte >= 0xE0 && byte <= 0xEF) {
                check.needed = 2;
                check.low = byte == 0xE0 ? 0xA0 : 0x80;
                check.high = byte == 0xED ? 0x9F : 0xBF;
            } else if (byte >= 0xF0 && byte <= 0xF4) {
                check.needed = 3;
                check.low = byte == 0xF0 ? 0x90 : 0x80;
                check.high = byte == 0xF4 ? 0x8F : 0xBF;
            } else {
                utf8_fail(stream, offset + i, byte, UTF8_INVALID_START);
                return TKI_ERR_INVALID_UTF8;
            }
            i++;
            continue;
        }
        uint8_t byte = data[i];
        if (byte < check.low || byte > check.high) {
            utf8_fail(stream, check.lead_offset, check.lead, UTF8_INVALID_CONTINUATION);
            return TKI_ERR_INVALID_UTF8;
        }
        check.needed--;
        check.low = 0x80;
        check.high = 0xBF;
        i++;
    }
    stream->utf8 = check;
    return TKI_OK;
}

/* ------------------------------------------------------------------ the held text */

/*
 * Room for `more` bytes after text_end, and 8 spare bytes beyond (a probe
 * character).  The text before text_start (the encoder is done with it) is
 * dropped then, but for the tail the search for refused strings has yet to
 * look at again.
 */
static int32_t reserve_text(tki_stream *stream, size_t more) {
    size_t drop = stream->text_start;
    if (stream->refused != NULL && stream->refused_from < drop) {
        drop = stream->refused_from; /* without refused strings there is no such tail */
    }
    if (drop > 0 && drop * 2 >= stream->text_end) {
        size_t kept = stream->text_end - drop;
        memmove(stream->text, stream->text + drop, kept);
        stream->text_base += drop;
        stream->text_start -= drop;
        stream->allowed_from -= drop;
        stream->refused_from = stream->refused_from > drop ? stream->refused_from - drop : 0;
        stream->text_end = kept;
    }
    if (more > SIZE_MAX - stream->text_end - 8) {
        return TKI_ERR_NOMEM;
    }
    size_t needed = stream->text_end + more + 8;
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

/* Drops text[text_start..text_start + count) for the encoder: it is done with it. */
static void consume(tki_stream *stream, size_t count) {
    stream->text_start += count;
    if (stream->allowed_from < stream->text_start) {
        stream->allowed_from = stream->text_start;
    }
}

/* ------------------------------------------------------------------ the open piece */

/* One character of each class the built-in patterns tell apart... */
static const char *const probe_characters[] = {
    "a", "A", "0", " ", "\n", "\r", "\t", "!", "'", "/", "x",
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
 * ...and the letters of the contractions ('s 't 're 've 'm 'll 'd, either
 * case).  They differ from "a" and "A" only within two bytes after an
 * apostrophe (every contraction is at most three bytes, apostrophe first, in
 * all the built-in patterns), so they are probes only there.
 */
static const char contraction_letters[] = "stelvrdmSTELVRDM";

/*
 * Length of data without a trailing UTF-8 sequence that more bytes could
 * still complete: what the cut character will be is not known yet, and the
 * probes stand for it.
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

/* The match of the open piece at piece[0..pending) for a text that may go on (its scans resume). */
static size_t match_open_piece(tki_stream *stream, const uint8_t *piece, size_t pending, int *touched_end) {
    if (stream->pattern == TKI_PATTERN_COMPILED) {
        return tki_pattern_match(stream->compiled, &stream->scan, piece, pending, 0, 0, touched_end);
    }
    return tki_pretokenize_match_ex(stream->pattern, piece, pending, 0, &stream->memo, 1, touched_end);
}

/* The open piece's scans are for a text that now starts `shift` bytes later. */
static void shift_scans(tki_stream *stream, size_t shift) {
    tki_scan_memo_shift(&stream->memo, shift);
    if (shift > 0 && stream->pattern == TKI_PATTERN_COMPILED) {
        tki_pattern_scan_reset(&stream->scan); /* as the memo: a rescan costs what this call read */
    }
}

/*
 * A run: an open piece that is one character repeated, at least
 * RUN_PROBE_MIN_CHARACTERS times, answers every probe `length` bytes further
 * on once it has grown by `length` bytes more of that character (each
 * probe's end moves with the run's end; with fewer than two characters it
 * may not: "'" then "s", or " " then "a", end elsewhere).  So while a run
 * only grows, the probes run once, not once per call: a long run fed in
 * chunks cost the 22 matches per chunk.  tests/test_streaming.py checks the
 * rule against the `regex` package on runs of characters of every class the
 * patterns tell apart, under every probe and other continuations.
 */
enum { RUN_PROBE_MIN_CHARACTERS = 4 };

/* A run of more characters than this, in the caller's text, is probed (certain_length) and
 * its cuts checked (match_at_end) on this many of its characters. */
enum { RUN_STAND_IN = 8 };

/* The run state for the open piece starting at stream offset piece_start (a new piece: empty). */
static void run_probes_begin(run_probes *run, uint64_t piece_start) {
    if (run->piece_start != piece_start || run->character_length == 0) {
        memset(run, 0, sizeof(*run));
        run->piece_start = piece_start;
    }
}

/*
 * Whether the open piece, its bytes [dropped, pending) at held[0..pending -
 * dropped) (those before are the run's character again), is one character
 * repeated: extends the run's checked end over the bytes not checked yet
 * (each byte is checked once per piece: a copy compared against itself one
 * character later).
 */
static int piece_is_run(run_probes *run, const uint8_t *held, size_t dropped, size_t pending) {
    if (run->broken) {
        return 0;
    }
    if (run->character_length == 0) { /* (nothing is dropped before the run is known) */
        uint8_t lead = held[0];
        uint32_t length = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
        if (dropped > 0 || pending < length) {
            return 0;
        }
        memcpy(run->character, held, length);
        run->character_length = length;
        run->run_end = length;
    }
    size_t length = run->character_length;
    if (pending > run->run_end) {
        size_t whole = run->run_end + (pending - run->run_end) / length * length;
        if (whole != pending || run->run_end < dropped + length ||
            memcmp(held + (run->run_end - dropped), held + (run->run_end - length - dropped),
                   pending - run->run_end) != 0) {
            run->broken = 1; /* another character (or part of one) follows */
            return 0;
        }
        run->run_end = pending;
    }
    return run->run_end == pending && pending >= RUN_PROBE_MIN_CHARACTERS * length;
}

/* Pieces longer than this, probed in a borrowed text, make the stream copy its text (runs
 * do not: their probes run once). */
enum { BORROWED_PROBE_COPY = 1 << 12 };

/*
 * Room for `needed` bytes in the stream's own buffer while its text is
 * borrowed (the bytes there are not kept: the caller fills it), doubling.
 * TKI_ERR_NOMEM, and nothing changed, on failure.
 */
static int32_t owned_room(tki_stream *stream, size_t needed) {
    if (needed <= stream->owned_capacity) {
        return TKI_OK;
    }
    size_t capacity = stream->owned_capacity * 2 > needed ? stream->owned_capacity * 2 : needed;
    uint8_t *owned = malloc(capacity);
    if (owned == NULL) {
        return TKI_ERR_NOMEM;
    }
    free(stream->owned);
    stream->owned = owned;
    stream->owned_capacity = capacity;
    return TKI_OK;
}

/*
 * piece[0..pending) into the stream's own buffer, with the 8 spare bytes
 * after it (a borrowed text's probes run there).  TKI_ERR_NOMEM on failure.
 */
static int32_t probe_copy(tki_stream *stream, const uint8_t *piece, size_t pending, int is_run) {
    if (pending > SIZE_MAX - 8) {
        return TKI_ERR_NOMEM;
    }
    int32_t status = owned_room(stream, pending + 8);
    if (status != TKI_OK) {
        return status;
    }
    memcpy(stream->owned, piece, pending);
    memset(stream->owned + pending, 0, 8);
    if (pending > BORROWED_PROBE_COPY && !is_run) {
        stream->own_next = 1;
    }
    return TKI_OK;
}

/*
 * Whether the open piece, held at piece[0..pending) after its run_dropped
 * bytes, is a run (above); 0 for a compiled pattern (its automaton answers).
 */
static int open_piece_is_run(tki_stream *stream, const uint8_t *piece, size_t pending) {
    if (stream->pattern == TKI_PATTERN_COMPILED) {
        return 0;
    }
    size_t dropped = stream->run_dropped;
    run_probes_begin(&stream->run, stream->text_base + stream->text_start - dropped);
    return piece_is_run(&stream->run, piece, dropped, dropped + pending);
}

/*
 * The bytes of the open piece piece[0..pending) that every continuation keeps
 * in it.  A compiled pattern's automaton says it from the state its scan
 * reached (tki_pattern_certain_end).  For the built-in patterns: the least
 * end the match takes under each probe character, and under the end of input
 * (`tentative_end`); the probe is written after the text (8 spare bytes) and
 * the bytes there restored.  A run (above; `is_run`) moves the last probes'
 * answer on.  Offsets here are in the held text: the run's answers are kept
 * from the piece's start (run_dropped bytes before).
 */
static int32_t certain_length(tki_stream *stream, uint8_t *piece, size_t pending, size_t tentative_end,
                              int is_run, size_t *out_certain) {
    if (stream->pattern == TKI_PATTERN_COMPILED) {
        size_t certain = tki_pattern_certain_end(stream->compiled, &stream->scan);
        *out_certain = certain < tentative_end ? certain : tentative_end;
        return TKI_OK;
    }
    run_probes *run = &stream->run;
    size_t dropped = stream->run_dropped;
    if (is_run && run->probed_at > 0 && dropped + pending >= run->probed_at) {
        size_t certain = run->probed_end + (dropped + pending - run->probed_at);
        run->probed_end = certain;
        run->probed_at = dropped + pending;
        certain = certain > dropped ? certain - dropped : 0;
        *out_certain = certain < tentative_end ? certain : tentative_end;
        return TKI_OK;
    }
    tki_scan_memo *memo = &stream->memo;
    size_t moved = 0; /* what a stand-in's answers are moved by */
    uint8_t stand_in[RUN_STAND_IN * 4 + 8] = {0};
    if (stream->borrowed && is_run && pending > RUN_STAND_IN * (size_t)run->character_length) {
        /* A run in the caller's text: RUN_STAND_IN characters of it take the probes (their
         * answers move with the run's end, above), not a copy of the run. */
        size_t whole = RUN_STAND_IN * (size_t)run->character_length;
        for (size_t at = 0; at < whole; at += run->character_length) {
            memcpy(stand_in + at, run->character, run->character_length);
        }
        moved = pending - whole;
        piece = stand_in;
        pending = whole;
        memo = NULL;
    } else if (stream->borrowed) {
        /* The caller's text takes no probe: a copy of the piece does (the scans are the
         * piece's).  A long one that is not a run is copied once: the blocks after it are
         * copied as they come. */
        int32_t status = probe_copy(stream, piece, pending, is_run);
        if (status != TKI_OK) {
            return status;
        }
        piece = stream->owned;
    }
    size_t certain = SIZE_MAX;
    uint8_t saved[8];
    memcpy(saved, piece + pending, sizeof(saved));
    for (size_t p = 0; p < sizeof(probe_characters) / sizeof(probe_characters[0]); p++) {
        size_t probe_length = strlen(probe_characters[p]);
        memcpy(piece + pending, probe_characters[p], probe_length);
        size_t end = tki_pretokenize_match_ex(stream->pattern, piece, pending + probe_length, 0, memo, 0, NULL);
        if (end < certain) {
            certain = end;
        }
    }
    int after_apostrophe = (pending >= 1 && piece[pending - 1] == '\'') ||
                           (pending >= 2 && piece[pending - 2] == '\'');
    for (size_t p = 0; after_apostrophe && p < sizeof(contraction_letters) - 1; p++) {
        piece[pending] = (uint8_t)contraction_letters[p];
        size_t end = tki_pretokenize_match_ex(stream->pattern, piece, pending + 1, 0, memo, 0, NULL);
        if (end < certain) {
            certain = end;
        }
    }
    memcpy(piece + pending, saved, sizeof(saved));
    certain += moved;
    pending += moved;
    run->probed_at = is_run ? dropped + pending : 0;
    run->probed_end = dropped + certain;
    *out_certain = certain < tentative_end ? certain : tentative_end;
    return TKI_OK;
}

static int32_t put(output *out, uint32_t id, uint32_t length) {
    if (out->count >= out->capacity) {
        return TKI_ERR_ARGUMENT; /* the caller sized the buffer from tki_stream_pending */
    }
    special_log *log = out->specials;
    if (log != NULL) {
        if (log->count == log->capacity) {
            size_t capacity = log->capacity * 2 + 16;
            special_place *grown = realloc(log->places, capacity * sizeof(special_place));
            if (grown == NULL) {
                return TKI_ERR_NOMEM;
            }
            log->places = grown;
            log->capacity = capacity;
        }
        special_place place = {out->count, length};
        log->places[log->count++] = place;
    }
    out->ids[out->count++] = id;
    return TKI_OK;
}

/* The engine's output out->ids[first..count) is ranks: makes them ids. */
static void ranks_out(const tki_stream *stream, output *out, size_t first) {
    tki_ranks_to_ids(stream->vocab, out->ids + first, out->count - first);
}

/* The open piece's tokens from its last certain end up to `end` (the piece's certain end, or its end). */
static int32_t emit_piece_tokens(tki_stream *stream, uint64_t end, output *out) {
    if (end <= stream->emitted) {
        return TKI_OK;
    }
    /* A token covers at least one byte: end - emitted ids at most. */
    if (out->capacity - out->count < end - stream->emitted) {
        return TKI_ERR_ARGUMENT;
    }
    size_t first = out->count;
    size_t produced = tki_stepper_read_back(&stream->piece, end, stream->emitted, out->ids + out->count);
    if (produced == SIZE_MAX) {
        return TKI_ERR_INTERNAL;
    }
    out->count += produced;
    ranks_out(stream, out, first);
    stream->emitted = end;
    return TKI_OK;
}

/*
 * The steps a stream keeps behind the last certain end: STEP_HISTORY times the
 * longest token.  A step reads the last t + 1; the rest lets the next call's
 * steps find the repeats they copy among this call's (a long run goes on
 * copying across feeds, instead of stepping a period anew after each).
 */
enum { STEP_HISTORY = 4 };

/* The ids of the open piece that are certain now; keeps only the steps still needed. */
static int32_t emit_certain(tki_stream *stream, output *out) {
    uint64_t end = stream->emitted;
    int32_t status = tki_stepper_certain_end(&stream->piece, stream->emitted, &end);
    if (status == TKI_OK) {
        status = emit_piece_tokens(stream, end, out);
    }
    if (status == TKI_OK) {
        uint64_t history = STEP_HISTORY * (uint64_t)stream->vocab->max_token_bytes;
        uint64_t length = stream->piece.length;
        uint64_t keep = length > history ? length - history : 0;
        tki_stepper_forget_before(&stream->piece, keep < stream->emitted ? keep : stream->emitted);
    }
    return status;
}

/*
 * The open piece ends at `end` of the held piece[0..): steps its last bytes
 * and emits the rest of its tokens.
 */
static int32_t finish_open_piece(tki_stream *stream, const uint8_t *piece, size_t end, output *out) {
    size_t dropped = stream->run_dropped;
    int32_t status = tki_stepper_run(&stream->piece, piece, dropped, dropped + end);
    if (status == TKI_OK) {
        status = emit_piece_tokens(stream, dropped + end, out);
    }
    tki_stepper_reset(&stream->piece);
    stream->emitted = 0;
    stream->run_dropped = 0;
    stream->finished_start = stream->text_base + stream->text_start - dropped;
    stream->finished_end = stream->finished_start + dropped + end;
    return status;
}

/*
 * A long run of one character need not be held whole: the steps read only the
 * bytes from the stepper's first kept end on, its matches and probes move on
 * with it (see RUN_PROBE_MIN_CHARACTERS), and once it has matched whole the
 * pre-tokenizer is not asked again while it only grows.  So the stream keeps
 * its last RUN_HELD bytes or more (from the stepper's base) and counts the
 * rest as dropped; a match of what is held (after the run breaks, or at the
 * end) ends where the whole piece's would, moved by the bytes dropped.  A
 * stream fed a run in chunks then holds a few chunks of it, not all of it.
 */
enum { RUN_HELD = 256 };

/* Drops the run's held bytes the stepper no longer reads (the piece at piece[0..pending)). */
static void drop_run_head(tki_stream *stream, size_t pending) {
    size_t dropped = stream->run_dropped, length = stream->run.character_length;
    uint64_t logical = dropped + pending, base = stream->piece.base;
    if (stream->borrowed || !stream->run.matched_whole || logical < 2 * RUN_HELD || length == 0) {
        return;
    }
    uint64_t limit = logical - RUN_HELD < base ? logical - RUN_HELD : base;
    size_t drop_to = (size_t)(limit / length * length); /* on a character boundary */
    if (drop_to > dropped && drop_to - dropped >= pending / 2) { /* seldom: the memo starts afresh */
        consume(stream, drop_to - dropped);
        stream->run_dropped = drop_to;
        stream->memo.count = 0; /* its scans were of the piece from the old start */
    }
}

/*
 * Whether piece[0..pending) is a prefix of a canonical token.  Then, for any k
 * <= pending, the automaton's state after stepping piece[0..k) from the root
 * has depth k, so tki_stepper_certain_end's window reaches back to the piece's
 * start and none of its tokens is certain, whichever bytes certain_length
 * would let it step: an open piece that is not begun can be held as it is,
 * without its match, probes and steps.  The next call's engine then takes it
 * as any other piece (the whole-piece shortcut, batched lookups) once it is
 * final.  Most feeds end in the middle of a word, which is such a prefix: the
 * probes were a tenth of a 4 KiB feed's instructions beyond the one-shot
 * work, and their matchers crowded the engine out of the instruction cache.
 */
static int is_token_prefix(const struct tki_vocab *vocab, const uint8_t *piece, size_t pending) {
    if (pending > vocab->max_token_bytes) {
        return 0;
    }
    uint32_t state = 0; /* the root */
    for (size_t i = 0; i < pending; i++) {
        state = tki_automaton_next(vocab, state, piece[i]);
        if (tki_state_depth(vocab, state) != i + 1) {
            return 0;
        }
    }
    return 1;
}

/*
 * Takes on the open piece held at piece[0..pending) (after its run_dropped
 * bytes): steps its certain bytes, emits its certain ids.
 */
static int32_t extend_open_piece(tki_stream *stream, uint8_t *piece, size_t pending, output *out) {
    if (!stream->vocab->incremental) {
        return TKI_OK; /* held until it is final */
    }
    if (stream->piece.length == 0 && stream->run_dropped == 0 && is_token_prefix(stream->vocab, piece, pending)) {
        return TKI_OK; /* nothing of it is certain yet (above) */
    }
    int is_run = open_piece_is_run(stream, piece, pending);
    size_t end = pending;
    if (!is_run || !stream->run.matched_whole) {
        int touched_end = 0;
        end = match_open_piece(stream, piece, pending, &touched_end);
        if (end == 0 || end > pending) {
            return TKI_ERR_INTERNAL;
        }
        stream->run.matched_whole = is_run && end == pending && touched_end;
    }
    size_t certain = 0;
    int32_t status = certain_length(stream, piece, pending, end, is_run, &certain);
    if (status != TKI_OK) {
        return status;
    }
    if (stream->piece.length == 0 && certain <= stream->vocab->longest_noncanonical) {
        return TKI_OK; /* it may yet be a non-canonical token: hold it */
    }
    size_t dropped = stream->run_dropped;
    if (dropped + certain > stream->piece.length) {
        status = tki_stepper_run(&stream->piece, piece, dropped, dropped + certain);
    }
    if (status == TKI_OK) {
        status = emit_certain(stream, out);
    }
    if (status == TKI_OK && is_run) {
        drop_run_head(stream, pending);
    }
    return status;
}

/*
 * The stretch's text text[text_start..stretch_end) with a pattern: the open
 * piece under way first (if its match no longer depends on the end, it is
 * finished), then the engine's pieces, then the new open piece.
 */
static int32_t advance_pieces(tki_stream *stream, size_t stretch_end, int stretch_ends, output *out) {
    uint8_t *data = stream->text + stream->text_start;
    size_t available = stretch_end - stream->text_start;
    if (!stretch_ends) {
        available = complete_length(data, available);
    }
    if (available == 0) {
        return TKI_OK;
    }
    int32_t status = TKI_OK;
    if (stream->piece.length > 0) {
        if (!stretch_ends && open_piece_is_run(stream, data, available) && stream->run.matched_whole) {
            return extend_open_piece(stream, data, available, out); /* a run that only grew */
        }
        int touched_end = 0;
        size_t end = match_open_piece(stream, data, available, &touched_end);
        if (end == 0 || end > available) {
            return TKI_ERR_INTERNAL;
        }
        if (touched_end && !stretch_ends) {
            return extend_open_piece(stream, data, available, out);
        }
        status = finish_open_piece(stream, data, end, out);
        shift_scans(stream, end);
        consume(stream, end);
        data += end;
        available -= end;
        if (status != TKI_OK || available == 0) {
            return status;
        }
    }
    size_t stop = 0, last_piece_tokens = 0, first = out->count;
    if (out->capacity - out->count < available) {
        return TKI_ERR_ARGUMENT;
    }
    status = tki_engine_encode(&stream->engine, data, available, stretch_ends, &stream->memo, out->ids,
                               &out->count, &stop, &last_piece_tokens);
    if (status != TKI_OK) {
        return status;
    }
    ranks_out(stream, out, first);
    shift_scans(stream, stop);
    consume(stream, stop);
    if (stop == available) {
        return TKI_OK;
    }
    return extend_open_piece(stream, data + stop, available - stop, out);
}

/*
 * The stretch's text without a pattern: one piece, stepped as its bytes come
 * (after the first longest_noncanonical bytes: it may be such a token).  Only
 * the bytes from the stepper's first kept end on stay.
 */
static int32_t advance_one_piece(tki_stream *stream, size_t stretch_end, int stretch_ends, output *out) {
    const struct tki_vocab *vocab = stream->vocab;
    uint8_t *data = stream->text + stream->text_start;
    size_t available = stretch_end - stream->text_start;
    int32_t status = TKI_OK;
    int begun = stream->piece.length > 0 || stream->piece_from > 0;
    if (!begun) {
        if (stretch_ends) { /* whole: the shortcut, else its BPE */
            size_t first = out->count;
            if (out->capacity - out->count < available) {
                return TKI_ERR_ARGUMENT;
            }
            status = tki_engine_encode_piece(&stream->engine, data, available, TKI_UNKNOWN_RANK, out->ids,
                                             &out->count);
            if (status == TKI_OK) {
                ranks_out(stream, out, first);
            }
            consume(stream, available);
            return status;
        }
        if (!vocab->incremental || available <= vocab->longest_noncanonical) {
            return TKI_OK; /* held: heap BPE at the end, or it may be a non-canonical token */
        }
    }
    uint64_t end = stream->piece_from + available;
    status = tki_stepper_run(&stream->piece, data, stream->piece_from, end);
    if (status != TKI_OK) {
        return status;
    }
    if (stretch_ends) {
        status = emit_piece_tokens(stream, end, out);
        tki_stepper_reset(&stream->piece);
        stream->emitted = 0;
        stream->piece_from = 0;
        consume(stream, available);
        return status;
    }
    status = emit_certain(stream, out);
    uint64_t keep = stream->piece.base; /* the bytes before it no copy compares */
    if (status == TKI_OK && keep > stream->piece_from) {
        consume(stream, (size_t)(keep - stream->piece_from));
        stream->piece_from = keep;
    }
    return status;
}

static int32_t advance(tki_stream *stream, size_t stretch_end, int stretch_ends, output *out) {
    return stream->pattern == 0 ? advance_one_piece(stream, stretch_end, stretch_ends, out)
                                : advance_pieces(stream, stretch_end, stretch_ends, out);
}

/* ------------------------------------------------------------------ special tokens */

/*
 * The next occurrence of a string of `matcher` in text[from..text_end) that
 * no continuation can change (*found; its start and string), and how far the
 * text is certainly free of any (*free_until: with none found, the searches
 * go on there).
 */
static int32_t next_certain_special(const tki_stream *stream, const tki_special_matcher *matcher, size_t from,
                                    int at_end, int *found, size_t *start, uint32_t *string,
                                    size_t *free_until) {
    size_t end = stream->text_end;
    size_t open = at_end ? end : tki_special_matcher_open_start(matcher, stream->text, end, from);
    size_t count = 0;
    int32_t status = tki_special_matcher_find(matcher, stream->text, end, from, start, string, 1, &count);
    *found = status == TKI_OK && count == 1 && *start < open;
    *free_until = *found ? *start : open;
    return status;
}

/* Cuts the held text at the certain specials and encodes the stretches between them. */
static int32_t process(tki_stream *stream, int at_end, output *out) {
    for (;;) {
        if (stream->refused != NULL) {
            int found = 0;
            size_t start = 0, free_until = 0;
            uint32_t string = 0;
            int32_t status = next_certain_special(stream, stream->refused, stream->refused_from, at_end, &found,
                                                  &start, &string, &free_until);
            if (status != TKI_OK) {
                return status;
            }
            if (found) {
                stream->error.offset = stream->text_base + start;
                stream->error.special_string = string;
                return TKI_ERR_REFUSED_SPECIAL;
            }
            stream->refused_from = free_until;
        }
        size_t stretch_end = stream->text_end;
        int found = 0;
        size_t start = 0;
        uint32_t string = 0;
        if (stream->allowed != NULL) {
            size_t free_until = 0;
            int32_t status = next_certain_special(stream, stream->allowed, stream->allowed_from, at_end, &found,
                                                  &start, &string, &free_until);
            if (status != TKI_OK) {
                return status;
            }
            stream->allowed_from = free_until;
            stretch_end = free_until;
        }
        int32_t status = advance(stream, stretch_end, found || at_end, out);
        if (status != TKI_OK || !found) {
            return status;
        }
        size_t length = special_length(stream->allowed, string);
        shift_scans(stream, 1); /* the next stretch's scans start afresh */
        status = put(out, tki_special_matcher_id(stream->allowed, string), (uint32_t)length);
        if (status != TKI_OK) {
            return status;
        }
        consume(stream, length);
        stream->allowed_from = stream->text_start;
    }
}

static size_t special_length(const tki_special_matcher *matcher, uint32_t string) {
    return tki_special_matcher_length(matcher, string);
}

/* ------------------------------------------------------------------ the API */

int32_t tki_stream_new_with_specials(const tki_vocab *vocab, int32_t pattern,
                                     const tki_special_matcher *allowed,
                                     const tki_special_matcher *refused, uint32_t flags,
                                     tki_stream **out_stream) {
    if (vocab == NULL || out_stream == NULL || pattern < 0 || pattern > TKI_PATTERN_O200K ||
        (flags & ~(uint32_t)(TKI_METHOD_LINEAR | TKI_METHOD_HEAP)) != 0) {
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
    stream->allowed = allowed;
    stream->refused = refused;
    atomic_init(&stream->busy, 0);
    tki_engine_init(&stream->engine, vocab, pattern, flags);
    tki_stepper_init(&stream->piece, vocab, flags & TKI_METHOD_LINEAR);
    int32_t status = tki_engine_check(&stream->engine);
    if (status != TKI_OK) {
        tki_stream_free(stream);
        return status;
    }
    *out_stream = stream;
    return TKI_OK;
}

int32_t tki_stream_new_compiled(const tki_vocab *vocab, const tki_pattern *pattern,
                                const tki_special_matcher *allowed, const tki_special_matcher *refused,
                                uint32_t flags, tki_stream **out_stream) {
    if (pattern == NULL) {
        return TKI_ERR_ARGUMENT;
    }
    int32_t status = tki_stream_new_with_specials(vocab, 0, allowed, refused, flags, out_stream);
    if (status == TKI_OK) {
        tki_stream *stream = *out_stream;
        stream->pattern = TKI_PATTERN_COMPILED;
        stream->compiled = pattern;
        tki_pattern_scan_reset(&stream->scan);
        tki_engine_use_compiled(&stream->engine, pattern, &stream->scan);
    }
    return status;
}

int32_t tki_stream_new(const tki_vocab *vocab, int32_t pattern, uint32_t flags, tki_stream **out_stream) {
    return tki_stream_new_with_specials(vocab, pattern, NULL, NULL, flags, out_stream);
}

void tki_stream_free(tki_stream *stream) {
    if (stream == NULL) {
        return;
    }
    tki_engine_free(&stream->engine);
    tki_stepper_free(&stream->piece);
    free(stream->borrowed ? stream->owned : stream->text);
    free(stream);
}

uint64_t tki_stream_pending(const tki_stream *stream) {
    if (stream == NULL) {
        return 0;
    }
    uint64_t held = stream->text_end - stream->text_start;
    /* pattern 0: the held bytes start at piece_from; with a pattern, at run_dropped */
    uint64_t covered = stream->emitted - (stream->pattern == 0 ? stream->piece_from : stream->run_dropped);
    return held - covered;
}

/* Takes the stream for this call; TKI_ERR_BUSY if another thread has it. */
static int32_t enter(tki_stream *stream) {
    if (atomic_exchange(&stream->busy, 1) != 0) {
        return TKI_ERR_BUSY;
    }
    if (stream->failure != TKI_OK) {
        atomic_store(&stream->busy, 0);
        return TKI_ERR_STREAM_FAILED;
    }
    return TKI_OK;
}

/* Ends the call: a failure is kept for every later one. */
static int32_t leave(tki_stream *stream, int32_t status) {
    if (status != TKI_OK) {
        stream->failure = status;
        stream->error.status = status;
    }
    uint64_t pending = tki_stream_pending(stream);
    if (pending > stream->max_pending) {
        stream->max_pending = pending;
    }
    atomic_store(&stream->busy, 0);
    return status;
}

int32_t tki_stream_feed_checked(tki_stream *stream, const uint8_t *data, size_t len, int32_t is_utf8,
                                uint32_t *out, size_t out_capacity, size_t *out_count) {
    if (stream == NULL || out_count == NULL || (data == NULL && len > 0) ||
        (out == NULL && out_capacity > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    *out_count = 0;
    int32_t status = enter(stream);
    if (status != TKI_OK) {
        return status;
    }
    output result = {out, NULL, out_capacity, 0};
    if (!is_utf8 || stream->utf8.needed > 0) {
        status = utf8_check_bytes(stream, data, len, stream->bytes_fed);
    }
    if (status == TKI_OK) {
        status = reserve_text(stream, len);
    }
    if (status == TKI_OK) {
        memcpy(stream->text + stream->text_end, data, len);
        stream->text_end += len;
        stream->bytes_fed += len;
        status = process(stream, 0, &result);
    }
    *out_count = result.count;
    stream->tokens_emitted += result.count;
    return leave(stream, status);
}

int32_t tki_stream_feed(tki_stream *stream, const uint8_t *data, size_t len, uint32_t *out,
                        size_t out_capacity, size_t *out_count) {
    return tki_stream_feed_checked(stream, data, len, 0, out, out_capacity, out_count);
}

/* Empties a stream that reached its end, for the next text (its counters stay). */
static void stream_reset(tki_stream *stream) {
    stream->text_base += stream->text_end;
    stream->text_start = stream->text_end = 0;
    stream->allowed_from = stream->refused_from = 0;
    tki_stepper_reset(&stream->piece);
    stream->piece_from = 0;
    stream->run_dropped = 0;
    stream->emitted = 0;
    stream->memo.count = 0;
    memset(&stream->run, 0, sizeof(stream->run));
    tki_pattern_scan_reset(&stream->scan);
    memset(&stream->utf8, 0, sizeof(stream->utf8));
}

int32_t tki_stream_finish(tki_stream *stream, uint32_t *out, size_t out_capacity, size_t *out_count) {
    if (stream == NULL || out_count == NULL || (out == NULL && out_capacity > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    *out_count = 0;
    int32_t status = enter(stream);
    if (status != TKI_OK) {
        return status;
    }
    output result = {out, NULL, out_capacity, 0};
    if (stream->utf8.needed > 0) {
        utf8_fail(stream, stream->utf8.lead_offset, stream->utf8.lead, UTF8_UNEXPECTED_END);
        status = TKI_ERR_INVALID_UTF8;
    }
    if (status == TKI_OK) {
        status = reserve_text(stream, 0); /* the spare bytes a probe may need */
    }
    if (status == TKI_OK) {
        status = process(stream, 1, &result);
    }
    if (status == TKI_OK) {
        stream_reset(stream);
    }
    *out_count = result.count;
    stream->tokens_emitted += result.count;
    return leave(stream, status);
}

void tki_stream_get_error(const tki_stream *stream, tki_stream_error *out_error) {
    if (stream == NULL || out_error == NULL) {
        return;
    }
    *out_error = stream->error;
    out_error->status = stream->failure;
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
    out_stats->live_ends = stream->piece.length - stream->emitted + (stream->piece.length > 0);
}

/* The stream offset where the open piece (pattern 0: the stretch) starts. */
static uint64_t open_piece_start(const tki_stream *stream) {
    uint64_t start = stream->text_base + stream->text_start;
    return start - (stream->pattern == 0 ? stream->piece_from : stream->run_dropped);
}

/* ------------------------------------------------------------------ bounded calls */

/*
 * Bounded calls are a stream fed from a whole text, block by block, until
 * more than max_tokens ids are certain.  Blocks start at 64 KiB and shrink as
 * the count nears the cap (to about twice the bytes the missing ids need at
 * the rate so far, at least 256): little is read past the point where the
 * answer is known, and the checkpoints that truncate needs (below) are close
 * to it.
 */
enum { BOUNDED_BLOCK = 1 << 16, BOUNDED_MIN_BLOCK = 256 };

typedef struct checkpoint {
    uint64_t fed;         /* F: the text fed so far                              */
    uint64_t open_start;  /* O: where the open piece starts (all before is final) */
} checkpoint;

typedef struct bounded_run {
    tki_stream *stream;   /* the caller's                                       */
    uint32_t *ids;        /* the first ids (ids_capacity of them), or NULL to count */
    uint64_t ids_capacity;
    uint64_t count;       /* ids certain so far (max_tokens + 1 at most)         */
    uint32_t *scratch;    /* a call's ids                                       */
    size_t scratch_capacity;
    /* truncate: the checkpoints, one per block; where the specials are among the
     * ids; and, after the last call, what its ids cover */
    checkpoint *checkpoints;
    size_t checkpoint_count, checkpoint_capacity;
    special_log *specials;
    uint64_t emitted;     /* the ids the calls wrote, all of them               */
    uint64_t covered;     /* the text they cover: text[0..covered)              */
    uint64_t last_first;  /* the last call's first id is the last_first-th      */
    const uint32_t *last_ids; /* its ids                                        */
} bounded_run;

static void bounded_free(bounded_run *run) {
    free(run->scratch);
    free(run->checkpoints);
}

/*
 * Takes a call's ids until max_tokens + 1 are taken; `direct`: the call wrote
 * them in place (after the ids taken so far).  Notes what truncate reads back:
 * where the call's ids are, and its specials' places in the run's ids.
 */
static void bounded_take(bounded_run *run, const output *got, uint64_t max_tokens, int direct, size_t logged) {
    uint64_t wanted = max_tokens == UINT64_MAX ? UINT64_MAX : max_tokens + 1 - run->count; /* (count <= max_tokens) */
    size_t taken = got->count < wanted ? got->count : (size_t)wanted;
    if (run->specials != NULL) {
        for (size_t i = logged; i < run->specials->count; i++) {
            run->specials->places[i].index += run->emitted;
        }
    }
    run->last_first = run->emitted;
    run->last_ids = got->ids;
    run->emitted += got->count;
    if (!direct && run->ids != NULL && run->count < run->ids_capacity) {
        uint64_t room = run->ids_capacity - run->count;
        memcpy(run->ids + run->count, got->ids, (taken < room ? taken : (size_t)room) * sizeof(uint32_t));
    }
    run->count += taken;
}

/* The next block's size: see above. */
static size_t next_block(uint64_t fed, uint64_t count, uint64_t max_tokens, size_t left) {
    size_t block = BOUNDED_BLOCK;
    if (max_tokens != UINT64_MAX && count > 0 && fed > 0) {
        uint64_t missing = max_tokens + 1 - count;
        double bytes_per_id = (double)fed / (double)count;
        double wanted = 2.0 * bytes_per_id * (double)missing;
        if (wanted < (double)block) {
            block = wanted < BOUNDED_MIN_BLOCK ? BOUNDED_MIN_BLOCK : (size_t)wanted;
        }
    }
    return block < left ? block : left;
}

/*
 * A bounded call reads the caller's text where it is (all of it, or what a
 * tki_text_source has made so far, which may move as the source grows it:
 * the stream keeps offsets into it): the stream refers to it instead of
 * copying it block by block into a buffer that held a long open piece
 * whole.  Blocks then cost no copy; the probes of an
 * open piece run on a copy of the piece (probe_copy), and a piece long enough
 * to make that a cost makes the stream copy the text it holds, once, and go on
 * as a stream fed blocks does.
 */
static void borrow_text(tki_stream *stream, const uint8_t *data, size_t data_len) {
    stream->owned = stream->text;
    stream->owned_capacity = stream->text_capacity;
    stream->text = (uint8_t *)(uintptr_t)data; /* read, never written while borrowed */
    stream->text_capacity = data_len;
    stream->borrowed = 1;
    stream->own_next = 0;
}

/* The stream's own buffer back (its text is the caller's no longer: the call is over or copied it). */
static void return_text(tki_stream *stream) {
    stream->text = stream->owned;
    stream->text_capacity = stream->owned_capacity;
    stream->owned = NULL;
    stream->owned_capacity = 0;
    stream->borrowed = 0;
    stream->own_next = 0;
}

/*
 * Copies the borrowed text the stream still holds (from the open piece, or
 * the tail the search for refused strings looks at again) into its own
 * buffer, which then takes the blocks as they come.  On failure nothing is
 * changed and TKI_ERR_NOMEM is returned.
 */
static int32_t own_text(tki_stream *stream) {
    size_t keep_from = stream->text_start;
    if (stream->refused != NULL && stream->refused_from < keep_from) {
        keep_from = stream->refused_from;
    }
    size_t kept = stream->text_end - keep_from;
    if (kept > SIZE_MAX - BOUNDED_BLOCK - 8) {
        return TKI_ERR_NOMEM;
    }
    int32_t status = owned_room(stream, kept + BOUNDED_BLOCK + 8);
    if (status != TKI_OK) {
        return status;
    }
    memcpy(stream->owned, stream->text + keep_from, kept);
    return_text(stream);
    stream->text_base += keep_from;
    stream->text_start -= keep_from;
    stream->allowed_from -= keep_from;
    stream->refused_from = stream->refused_from > keep_from ? stream->refused_from - keep_from : 0;
    stream->text_end = kept;
    return TKI_OK;
}

/* Whether a stream has nothing under way (made, or just finished). */
static int stream_is_empty(const tki_stream *stream) {
    return stream->text_end == stream->text_start && stream->piece.length == 0 && stream->piece_from == 0 &&
           stream->utf8.needed == 0;
}

/*
 * The text a bounded call reads: all of it at once (source NULL), or what a
 * tki_text_source has made ready so far, data[0..length) (complete: that is
 * all of it).
 */
typedef struct text_view {
    const tki_text_source *source;
    const uint8_t *data;
    size_t length;
    int32_t complete;
} text_view;

static void view_whole(text_view *view, const uint8_t *data, size_t data_len) {
    view->source = NULL;
    view->data = data;
    view->length = data_len;
    view->complete = 1;
}

/*
 * Makes the view hold text[0..wanted), or all of the text if shorter.  On
 * failure the source's status (TKI_ERR_INTERNAL for a source that broke its
 * contract), and the view is as it was.
 */
static int32_t view_more(text_view *view, size_t wanted) {
    if (view->complete || view->length >= wanted) {
        return TKI_OK;
    }
    const uint8_t *data = NULL;
    size_t length = 0;
    int32_t complete = 0;
    int32_t status = view->source->more(view->source->context, wanted, &data, &length, &complete);
    if (status != TKI_OK) {
        return status;
    }
    if (length < view->length || (length < wanted && !complete) || (data == NULL && length > 0)) {
        return TKI_ERR_INTERNAL;
    }
    view->data = data;
    view->length = length;
    view->complete = complete != 0;
    return TKI_OK;
}

/*
 * Feeds the view's text to run->stream until more than max_tokens ids are
 * certain or the text ends (then finishes), asking the view for a block
 * ahead as it goes.  *consumed: the bytes fed.  The stream is left empty
 * again (reset) unless it failed.
 */
static int32_t bounded_feed(bounded_run *run, text_view *view, uint64_t max_tokens, int want_checkpoints,
                            size_t *consumed, int *exceeded) {
    tki_stream *stream = run->stream;
    size_t fed = 0;
    *exceeded = 0;
    int32_t status = enter(stream);
    if (status != TKI_OK) {
        return status;
    }
    if (!stream_is_empty(stream)) {
        atomic_store(&stream->busy, 0);
        return TKI_ERR_ARGUMENT; /* a bounded call starts a text */
    }
    status = view_more(view, next_block(0, 0, max_tokens, SIZE_MAX - 1) + 1);
    if (status != TKI_OK) {
        return leave(stream, status);
    }
    if (stream->text_end == 0 && stream->allowed_from == 0 && stream->refused_from == 0) {
        borrow_text(stream, view->data, view->length);
    }
    for (;;) {
        size_t block = next_block(fed, run->count, max_tokens, SIZE_MAX - fed - 1);
        status = view_more(view, fed + block + 1); /* (+ 1: whether the text goes on) */
        if (status != TKI_OK) {
            break;
        }
        if (stream->borrowed) { /* (the stream keeps offsets into its text, never pointers) */
            stream->text = (uint8_t *)(uintptr_t)view->data;
            stream->text_capacity = view->length;
        }
        block = block < view->length - fed ? block : view->length - fed;
        int finishing = block == 0; /* (the view is complete: it was asked for more) */
        uint64_t pending = tki_stream_pending(stream);
        if (pending > SIZE_MAX / sizeof(uint32_t) - BOUNDED_BLOCK - 1) {
            status = TKI_ERR_NOMEM;
            break;
        }
        size_t needed = (size_t)pending + block + 1;
        uint64_t room = run->ids != NULL && run->count < run->ids_capacity ? run->ids_capacity - run->count : 0;
        int direct = room >= needed;
        if (!direct && needed > run->scratch_capacity) { /* (a call's ids are taken before the next: no copy) */
            if (needed / 2 < run->scratch_capacity && run->scratch_capacity <= SIZE_MAX / sizeof(uint32_t) / 2) {
                needed = run->scratch_capacity * 2; /* (an open run's pending grows with each block) */
            }
            free(run->scratch);
            run->scratch_capacity = 0;
            run->scratch = malloc(needed * sizeof(uint32_t));
            if (run->scratch == NULL) {
                status = TKI_ERR_NOMEM;
                break;
            }
            run->scratch_capacity = needed;
        }
        output got = {run->scratch, run->specials, run->scratch_capacity, 0};
        if (direct) { /* straight after the ids taken so far: no copy */
            got.ids = run->ids + run->count;
            got.capacity = needed;
        }
        size_t logged = run->specials != NULL ? run->specials->count : 0;
        if (stream->borrowed && stream->own_next) {
            status = own_text(stream);
            if (status != TKI_OK) {
                break;
            }
        }
        if (stream->borrowed) {
            stream->text_end += block; /* data[0..text_end): the text so far */
            stream->bytes_fed += block;
            status = process(stream, finishing, &got);
        } else if (finishing) {
            status = reserve_text(stream, 0);
            if (status == TKI_OK) {
                status = process(stream, 1, &got);
            }
        } else {
            status = reserve_text(stream, block);
            if (status == TKI_OK) {
                memcpy(stream->text + stream->text_end, view->data + fed, block);
                stream->text_end += block;
                stream->bytes_fed += block;
                status = process(stream, 0, &got);
            }
        }
        stream->tokens_emitted += got.count;
        if (status != TKI_OK) {
            break;
        }
        fed += block;
        bounded_take(run, &got, max_tokens, direct, logged);
        run->covered = stream->bytes_fed - tki_stream_pending(stream);
        if (want_checkpoints && !finishing) {
            if (run->checkpoint_count == run->checkpoint_capacity) {
                size_t capacity = run->checkpoint_capacity * 2 + 16;
                checkpoint *grown = realloc(run->checkpoints, capacity * sizeof(checkpoint));
                if (grown == NULL) {
                    status = TKI_ERR_NOMEM;
                    break;
                }
                run->checkpoints = grown;
                run->checkpoint_capacity = capacity;
            }
            checkpoint point = {fed, open_piece_start(stream)};
            run->checkpoints[run->checkpoint_count++] = point;
        }
        if (run->count > max_tokens) {
            *exceeded = 1;
            break;
        }
        if (finishing) {
            break;
        }
    }
    if (stream->borrowed) {
        return_text(stream); /* (the caller resets the stream, or it failed) */
    }
    *consumed = fed;
    return leave(stream, status);
}

/* tki_stream_bounded on a view; ids_capacity: out's. */
static int32_t bounded_view(tki_stream *stream, text_view *view, uint64_t max_tokens, uint32_t *out,
                            uint64_t ids_capacity, uint64_t *out_count, size_t *out_consumed,
                            int32_t *out_exceeded) {
    *out_count = 0;
    *out_consumed = 0;
    *out_exceeded = 0;
    bounded_run run;
    memset(&run, 0, sizeof(run));
    run.stream = stream;
    run.ids = out;
    run.ids_capacity = ids_capacity;
    size_t consumed = 0;
    int exceeded = 0;
    int32_t status = bounded_feed(&run, view, max_tokens, 0, &consumed, &exceeded);
    bounded_free(&run);
    if (status == TKI_OK) {
        stream_reset(stream); /* (exceeded: the rest is not wanted) */
        *out_count = exceeded ? max_tokens + 1 : run.count;
        *out_consumed = consumed;
        *out_exceeded = exceeded;
    }
    return status;
}

int32_t tki_stream_bounded(tki_stream *stream, const uint8_t *data, size_t data_len, uint64_t max_tokens,
                           uint32_t *out, uint64_t *out_count, size_t *out_consumed, int32_t *out_exceeded) {
    if (stream == NULL || out_count == NULL || out_consumed == NULL || out_exceeded == NULL ||
        (data == NULL && data_len > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    text_view view;
    view_whole(&view, data, data_len);
    return bounded_view(stream, &view, max_tokens, out, max_tokens < data_len ? max_tokens + 1 : data_len,
                        out_count, out_consumed, out_exceeded); /* (all a run takes) */
}

int32_t tki_stream_bounded_source(tki_stream *stream, const tki_text_source *source, uint64_t max_tokens,
                                  uint32_t *out, uint64_t *out_count, size_t *out_consumed,
                                  int32_t *out_exceeded) {
    if (stream == NULL || source == NULL || source->more == NULL || out_count == NULL || out_consumed == NULL ||
        out_exceeded == NULL || (out != NULL && max_tokens == UINT64_MAX)) {
        return TKI_ERR_ARGUMENT;
    }
    text_view view = {source, NULL, 0, 0};
    return bounded_view(stream, &view, max_tokens, out, out != NULL ? max_tokens + 1 : 0, out_count, out_consumed,
                        out_exceeded);
}

int32_t tki_encode_bounded_specials(const tki_vocab *vocab, int32_t pattern,
                                    const tki_special_matcher *allowed,
                                    const tki_special_matcher *refused, const uint8_t *data,
                                    size_t data_len, uint64_t max_tokens, uint32_t *out,
                                    uint64_t *out_count, size_t *out_consumed, int32_t *out_exceeded,
                                    tki_stream_error *out_error) {
    tki_stream *stream = NULL;
    int32_t status = tki_stream_new_with_specials(vocab, pattern, allowed, refused, 0, &stream);
    if (status == TKI_OK) {
        status = tki_stream_bounded(stream, data, data_len, max_tokens, out, out_count, out_consumed, out_exceeded);
        if (status != TKI_OK && out_error != NULL) {
            tki_stream_get_error(stream, out_error);
        }
    }
    tki_stream_free(stream);
    return status;
}

int32_t tki_encode_bounded(const tki_vocab *vocab, int32_t pattern, const uint8_t *data,
                           size_t data_len, uint64_t max_tokens, uint32_t *out,
                           uint64_t *out_count, size_t *out_consumed, int32_t *out_exceeded) {
    return tki_encode_bounded_specials(vocab, pattern, NULL, NULL, data, data_len, max_tokens, out,
                                       out_count, out_consumed, out_exceeded, NULL);
}

/*
 * Truncation.  The answer is the longest k <= max_tokens for which the first
 * k ids of the text are the encoding of the text they cover, text[0..E_k)
 * (ending on a character boundary).  A bounded run gives the ids and the text
 * they cover; the ends E_k are found walking back from there over the ids'
 * bytes (a token's length, or a special's, which the run noted where it put
 * one).  Each candidate k is then checked from the last checkpoint before
 * E_k: at a checkpoint (F, O), every piece before O was final with the text
 * ending at F, so it is a piece of every text[0..E) with E >= F too, and the
 * encoding of text[0..E) is the ids before O followed by the encoding of
 * text[O..E) as a stretch of its own (no pattern looks behind a piece's
 * start).  When [O, E) is one piece of text[0..E) and the whole text's piece
 * at O was still open at the end of the run (so it reaches past E), the ids of
 * [O, E) are the BPE of that piece's first bytes by the way the steps read
 * back, and the check costs one match of the pre-tokenizer, not an encode (in
 * a run, a match of a few of its characters: match_at_end).  The ids from O
 * on are found only where the check compares them.
 */
enum { TRUNCATE_ATTEMPTS = 16 };

/* The bytes of count ids that are tokens (no special among them). */
static uint64_t tokens_bytes(const struct tki_vocab *vocab, const uint32_t *ids, size_t count) {
    uint64_t sums[4] = {0, 0, 0, 0};
    size_t i = 0;
    if (!vocab->sparse_ids) { /* (an id is its rank) */
        for (; i + 4 <= count; i += 4) {
            sums[0] += vocab->token_length[ids[i]];
            sums[1] += vocab->token_length[ids[i + 1]];
            sums[2] += vocab->token_length[ids[i + 2]];
            sums[3] += vocab->token_length[ids[i + 3]];
        }
    }
    for (; i < count; i++) {
        uint32_t rank = tki_rank_of_id(vocab, ids[i]);
        sums[0] += rank == TKI_NONE ? 0 : vocab->token_length[rank];
    }
    return sums[0] + sums[1] + sums[2] + sums[3];
}

/*
 * A walk over a bounded run's ids from the i-th (a cursor in the specials'
 * places keeps it linear): truncate's, back; ids_bytes', forward.
 */
typedef struct id_walk {
    const bounded_run *run;
    uint64_t index;       /* the ids before it are walked next                  */
    size_t special;       /* the places before it are the specials before index */
} id_walk;

static void id_walk_begin(id_walk *walk, const bounded_run *run, uint64_t index) {
    walk->run = run;
    walk->index = index;
    size_t lo = 0, hi = run->specials != NULL ? run->specials->count : 0; /* the first place >= index */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (run->specials->places[mid].index < index) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    walk->special = lo;
}

/* The i-th id of a bounded run that truncate ran (i < emitted). */
static uint32_t run_id(const bounded_run *run, uint64_t i) {
    return i < run->ids_capacity ? run->ids[i] : run->last_ids[i - run->last_first];
}

/* Steps the walk back over one id (index > 0): its bytes in the text. */
static uint64_t id_walk_back(id_walk *walk) {
    const bounded_run *run = walk->run;
    uint64_t i = --walk->index;
    if (walk->special > 0 && run->specials->places[walk->special - 1].index == i) {
        return run->specials->places[--walk->special].length;
    }
    uint32_t id = run_id(run, i);
    return tokens_bytes(run->stream->vocab, &id, 1);
}

/* The bytes in the text of the ids [from, to) of a bounded run that truncate ran (to <= emitted). */
static uint64_t ids_bytes(const bounded_run *run, uint64_t from, uint64_t to) {
    id_walk walk;
    id_walk_begin(&walk, run, from); /* (walk.special: the first special at or after from) */
    size_t specials = run->specials != NULL ? run->specials->count : 0;
    uint64_t bytes = 0;
    while (from < to) {
        uint64_t until = to;
        if (walk.special < specials && run->specials->places[walk.special].index < to) {
            until = run->specials->places[walk.special].index;
        }
        while (from < until) { /* tokens: from the caller's array, then the last call's */
            uint64_t stop = from < run->ids_capacity && until > run->ids_capacity ? run->ids_capacity : until;
            const uint32_t *ids = from < run->ids_capacity ? run->ids + from : run->last_ids + (from - run->last_first);
            bytes += tokens_bytes(run->stream->vocab, ids, (size_t)(stop - from));
            from = stop;
        }
        if (from < to) { /* the special at `until` */
            bytes += run->specials->places[walk.special++].length;
            from++;
        }
    }
    return bytes;
}

/*
 * The index i <= k with the first i ids ending at `start`, walking back from
 * the k-th id, which ends at `end` (>= start), or SIZE_MAX if no id ends there.
 */
static size_t id_ending_at(const bounded_run *run, size_t k, uint64_t end, uint64_t start) {
    id_walk walk;
    id_walk_begin(&walk, run, k);
    while (end > start && walk.index > 0) {
        uint64_t bytes = id_walk_back(&walk);
        end = bytes <= end ? end - bytes : 0;
    }
    return end == start ? (size_t)walk.index : SIZE_MAX;
}

/*
 * The built-in pattern's match at piece[0..len) with the text ending there,
 * where piece starts the stream's open piece.  When piece[0..len) lies in the
 * open piece's run (one character repeated, as certain_length found it) and
 * holds more than RUN_STAND_IN characters, a run of RUN_STAND_IN of them
 * stands for it: a run of at least RUN_PROBE_MIN_CHARACTERS is matched whole
 * at the end of the text for every length or for none (as the probes' answers
 * move with its end, above; tests/test_gateway.py checks it against the
 * `regex` package), so the answer is len or less than len either way.  The
 * check of a cut in a long run then reads a few bytes, not the run.
 */
static size_t match_at_end(const tki_stream *stream, const uint8_t *piece, size_t len) {
    const run_probes *run = &stream->run;
    size_t length = run->character_length;
    if (length == 0 || run->broken || run->piece_start != open_piece_start(stream) || run->run_end < len ||
        len % length != 0 || len / length <= RUN_STAND_IN) {
        return tki_pretokenize_match(stream->pattern, piece, len, 0);
    }
    uint8_t stand_in[RUN_STAND_IN * 4 + 8] = {0};
    for (size_t i = 0; i < RUN_STAND_IN; i++) {
        memcpy(stand_in + i * length, run->character, length);
    }
    size_t whole = RUN_STAND_IN * length;
    size_t stand_in_end = tki_pretokenize_match(stream->pattern, stand_in, whole, 0);
    return stand_in_end == whole ? len : stand_in_end;
}

/*
 * Whether the first k ids, which end at `end`, are the encoding of
 * text[0..end).  The ids from the open piece's start on are found (walking
 * back over their lengths) only where they are compared.
 */
static int32_t truncation_holds(const bounded_run *run, const uint8_t *data, uint64_t end, size_t k,
                                const tki_special_matcher *allowed, uint32_t **scratch, size_t *scratch_capacity,
                                int *holds) {
    const tki_stream *stream = run->stream;
    *holds = 0;
    const checkpoint *point = NULL;
    for (size_t j = run->checkpoint_count; j > 0; j--) {
        if (run->checkpoints[j - 1].fed <= end) {
            point = &run->checkpoints[j - 1];
            break;
        }
    }
    uint64_t start = point != NULL ? point->open_start : 0;
    if (start == end) {
        *holds = 1; /* the ids before the open piece are final */
        return TKI_OK;
    }
    int still_open = stream->piece.length > 0 && open_piece_start(stream) == start;
    if (still_open) {
        /* One piece from `start` to `end` in text[0..end)?  Specials: none can start in it
         * (the run cut the stretch there), unless the prefix made one. */
        size_t piece_end = (size_t)(end - start);
        if (stream->pattern == TKI_PATTERN_COMPILED) {
            tki_pattern_scan scan;
            tki_pattern_scan_reset(&scan);
            piece_end = tki_pattern_match(stream->compiled, &scan, data + start, (size_t)(end - start), 0, 1, NULL);
        } else if (stream->pattern != 0) {
            piece_end = match_at_end(stream, data + start, (size_t)(end - start));
        }
        size_t special_start = 0, found = 0;
        uint32_t string = 0;
        if (allowed != NULL) {
            int32_t status = tki_special_matcher_find(allowed, data, (size_t)end, (size_t)start, &special_start,
                                                      &string, 1, &found);
            if (status != TKI_OK) {
                return status;
            }
        }
        if (piece_end == end - start && found == 0) {
            /* Its BPE, unless it is a token (then that token's id alone). */
            uint32_t rank = tki_lookup_rank(stream->vocab, data + start, (size_t)(end - start));
            *holds = rank == TKI_NONE || (k - 1 == id_ending_at(run, k, end, start) &&
                                          run->ids[k - 1] == tki_id_of_rank(stream->vocab, rank));
            return TKI_OK;
        }
    }
    size_t first = id_ending_at(run, k, end, start);
    if (first == SIZE_MAX) {
        return TKI_OK; /* not an id boundary: cannot be checked from here */
    }
    size_t span = (size_t)(end - start);
    if (span > *scratch_capacity) {
        uint32_t *grown = realloc(*scratch, span * sizeof(uint32_t));
        if (grown == NULL) {
            return TKI_ERR_NOMEM;
        }
        *scratch = grown;
        *scratch_capacity = span;
    }
    size_t count = 0;
    int32_t status = stream->pattern == TKI_PATTERN_COMPILED
                         ? tki_pattern_encode_with_specials(stream->vocab, stream->compiled, allowed, data + start,
                                                            span, stream->flags, *scratch, span, &count, NULL)
                         : tki_encode_with_specials(stream->vocab, stream->pattern, allowed, data + start, span,
                                                    stream->flags, *scratch, span, &count, NULL);
    if (status != TKI_OK) {
        return status;
    }
    *holds = count == k - first && memcmp(*scratch, run->ids + first, count * sizeof(uint32_t)) == 0;
    return TKI_OK;
}

/* tki_stream_truncate on a view (whole: max_tokens at most its length). */
static int32_t truncate_view(tki_stream *stream, text_view *view, uint64_t max_tokens, uint32_t *out,
                             uint64_t *out_count, size_t *out_prefix_len) {
    *out_count = 0;
    *out_prefix_len = 0;
    bounded_run run;
    memset(&run, 0, sizeof(run));
    run.stream = stream;
    run.ids = out; /* the first max_tokens: the candidates are checked there */
    run.ids_capacity = max_tokens;
    uint32_t *scratch = NULL;
    size_t scratch_capacity = 0;
    special_log specials = {NULL, 0, 0};
    run.specials = &specials;
    size_t consumed = 0;
    int exceeded = 0;
    int32_t status = bounded_feed(&run, view, max_tokens, 1, &consumed, &exceeded);
    const uint8_t *data = view->data; /* (the text read: a prefix ends within it, on a character boundary) */
    size_t data_len = view->length;
    size_t keep = 0;
    uint64_t prefix = 0;
    if (status == TKI_OK && !exceeded) {
        keep = (size_t)run.count;
        prefix = data_len;
    } else if (status == TKI_OK) {
        /* where the first k ids end, k from max_tokens down: from the start or from what the ids cover */
        uint64_t end = max_tokens <= run.emitted - max_tokens ? ids_bytes(&run, 0, max_tokens)
                                                              : run.covered - ids_bytes(&run, max_tokens, run.emitted);
        id_walk walk;
        id_walk_begin(&walk, &run, max_tokens);
        uint32_t attempts = 0;
        for (size_t k = (size_t)max_tokens; k > 0 && attempts < TRUNCATE_ATTEMPTS; end -= id_walk_back(&walk), k--) {
            if (end < data_len && (data[end] & 0xC0) == 0x80) {
                continue; /* the k-th id ends inside a character */
            }
            int holds = 0;
            status = truncation_holds(&run, data, end, k, stream->allowed, &scratch, &scratch_capacity, &holds);
            if (status != TKI_OK || holds) {
                keep = k;
                prefix = end;
                break;
            }
            attempts++;
        }
    }
    if (status == TKI_OK) {
        *out_count = keep;
        *out_prefix_len = (size_t)prefix;
        stream_reset(stream);
    }
    free(specials.places);
    free(scratch);
    bounded_free(&run);
    return status;
}

int32_t tki_stream_truncate(tki_stream *stream, const uint8_t *data, size_t data_len, uint64_t max_tokens,
                            uint32_t *out, uint64_t *out_count, size_t *out_prefix_len) {
    if (stream == NULL || out_count == NULL || out_prefix_len == NULL || (data == NULL && data_len > 0) ||
        (out == NULL && max_tokens > 0 && data_len > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    if (max_tokens > data_len) {
        max_tokens = data_len; /* an id covers a byte at least: the cap cannot be passed */
    }
    text_view view;
    view_whole(&view, data, data_len);
    return truncate_view(stream, &view, max_tokens, out, out_count, out_prefix_len);
}

int32_t tki_stream_truncate_source(tki_stream *stream, const tki_text_source *source, uint64_t max_tokens,
                                   uint32_t *out, uint64_t *out_count, size_t *out_prefix_len) {
    if (stream == NULL || source == NULL || source->more == NULL || out_count == NULL || out_prefix_len == NULL ||
        (out == NULL && max_tokens > 0) || max_tokens == UINT64_MAX) {
        return TKI_ERR_ARGUMENT;
    }
    text_view view = {source, NULL, 0, 0};
    return truncate_view(stream, &view, max_tokens, out, out_count, out_prefix_len);
}

int32_t tki_truncate(const tki_vocab *vocab, int32_t pattern, const tki_special_matcher *allowed,
                     const tki_special_matcher *refused, const uint8_t *data, size_t data_len,
                     uint64_t max_tokens, uint32_t *out, uint64_t *out_count, size_t *out_prefix_len,
                     tki_stream_error *out_error) {
    tki_stream *stream = NULL;
    int32_t status = tki_stream_new_with_specials(vocab, pattern, allowed, refused, 0, &stream);
    if (status == TKI_OK) {
        status = tki_stream_truncate(stream, data, data_len, max_tokens, out, out_count, out_prefix_len);
        if (status != TKI_OK && out_error != NULL) {
            tki_stream_get_error(stream, out_error);
        }
    }
    tki_stream_free(stream);
    return status;
}
