/*
 * tiktoken_inc.h — the one public header of the tiktoken_inc C core.
 *
 * The core turns a vocabulary (token bytes -> rank) into immutable tables and
 * encodes byte strings with tiktoken's exact BPE semantics using the
 * incremental algorithm: every byte costs O(log^2 t) worst case, t being the
 * longest token.  A built vocabulary is read-only, so any number of threads
 * may encode with it at once.  Every function returns a tki_status; nothing
 * aborts, and nothing reads outside the buffers it is given.
 */
#ifndef TIKTOKEN_INC_H
#define TIKTOKEN_INC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest token, in bytes, the incremental algorithm takes (in-block indices are
 * 16-bit); a vocabulary with a longer one is encoded with the heap BPE. */
#define TKI_MAX_TOKEN_BYTES 4096u

typedef enum tki_status {
    TKI_OK = 0,
    TKI_ERR_NOMEM = 1,           /* an allocation failed; nothing was changed   */
    TKI_ERR_ARGUMENT = 2,        /* a NULL pointer, a size that overflows, ...  */
    TKI_ERR_EMPTY_TOKEN = 3,     /* a mergeable token with no bytes             */
    TKI_ERR_TOKEN_TOO_LONG = 4,  /* longer than TKI_MAX_TOKEN_BYTES             */
    TKI_ERR_DUPLICATE_BYTES = 5, /* two ranks for the same bytes                */
    TKI_ERR_DUPLICATE_RANK = 6,  /* two tokens (or a token and a special) share a rank */
    TKI_ERR_MISSING_BYTE = 7,    /* some single byte has no rank                */
    TKI_ERR_UNKNOWN_TOKEN = 8,   /* a rank with no bytes (decode), or bytes with no rank */
    TKI_ERR_INTERNAL = 9,        /* an invariant failed: a bug, reported not hidden */
    TKI_ERR_MALFORMED_LINE = 10, /* rank file: a line is not "<base64> <rank>"   */
    TKI_ERR_BAD_BASE64 = 11,     /* rank file: a token's base64 does not decode  */
    TKI_ERR_RANK_RANGE = 12,     /* rank file: a rank of 2^32 - 1 or more         */
    TKI_ERR_NO_TOKENS = 13,      /* rank file: not one token                      */
    TKI_ERR_NO_BYTE_TOKEN = 14,  /* encode: a byte of the text is no token and no  */
                                 /*   merge covers it (a vocabulary without that   */
                                 /*   single byte)                                 */
    TKI_ERR_INVALID_UTF8 = 15,   /* stream: the bytes fed are not UTF-8 (tki_stream_get_error) */
    TKI_ERR_REFUSED_SPECIAL = 16,/* the text holds a refused special token (tki_stream_get_error) */
    TKI_ERR_BUSY = 17,           /* stream: another thread is using it; nothing was changed */
    TKI_ERR_STREAM_FAILED = 18   /* stream: an earlier call failed; it takes no more (tki_stream_get_error) */
} tki_status;

/* The largest status. */
#define TKI_STATUS_LAST 18

/* A static, human-readable sentence for a status. */
const char *tki_status_message(int32_t status);

typedef struct tki_vocab tki_vocab;

/*
 * Builds a vocabulary.
 *   token_bytes/token_offsets/token_ranks: `token_count` mergeable tokens; token i
 *     is token_bytes[token_offsets[i] .. token_offsets[i+1]) (so token_offsets has
 *     token_count + 1 entries) with rank token_ranks[i].
 *   special_*: the same for special tokens; they only decode (they are never merged).
 *   Ranks are ids: any values below 2^32 - 1, dense or far apart (the tables
 *   take memory in proportion to the number of tokens, not to the largest rank).
 *   Offsets must not decrease.  On failure *error_index names the offending
 *   mergeable token (or token_count + the index of an offending special token);
 *   for TKI_ERR_MISSING_BYTE it is the value of the missing byte.
 */
int32_t tki_vocab_build(const uint8_t *token_bytes, const uint64_t *token_offsets,
                        const uint32_t *token_ranks, uint32_t token_count,
                        const uint8_t *special_bytes, const uint64_t *special_offsets,
                        const uint32_t *special_ranks, uint32_t special_count,
                        tki_vocab **out_vocab, uint32_t *error_index);

void tki_vocab_free(tki_vocab *vocab);

/*
 * Encoding keeps the ranks of short pieces that are no token from one call to
 * the next (per vocabulary, a memo per thread that encodes, at most 16 of
 * 256 KiB), so that a piece that comes again costs a look-up instead of a step
 * per byte.  The ids never depend on it.  This frees the memos no call is
 * using: the next calls start with none, as the first call did.  Safe while
 * other threads encode with the vocabulary.
 */
void tki_vocab_forget_pieces(tki_vocab *vocab);

/*
 * Gives a vocabulary without special tokens (one read from an image: an image
 * holds none, so that vocabularies differing only in their special tokens
 * share one) the special tokens special_* (as tki_vocab_build takes them).
 * Not safe while other threads use the vocabulary: call it before sharing it.
 * TKI_ERR_ARGUMENT if the vocabulary has special tokens already; else the
 * errors tki_vocab_build gives for special tokens, *error_index (may be NULL)
 * naming the first wrong one; on failure the vocabulary has none.
 */
int32_t tki_vocab_set_specials(tki_vocab *vocab, const uint8_t *special_bytes,
                               const uint64_t *special_offsets, const uint32_t *special_ranks,
                               uint32_t special_count, uint32_t *error_index);

/*
 * Rank files (`.tiktoken`): one "base64(token bytes) SPACE rank" per line,
 * checked exactly as tiktoken_inc/load.py checks them (rank_file.c says how).
 * On failure *error says where: `line` is 1-based (0: the file as a whole),
 * text[line_start .. line_end) is that line without its '\n', and for a
 * duplicate token or rank `earlier_line` is the line that gave it first.
 */
typedef struct tki_rank_file_error {
    uint64_t line;
    uint64_t line_start;
    uint64_t line_end;
    uint64_t earlier_line;
} tki_rank_file_error;

/* A parsed rank file: token i is bytes[offsets[i] .. offsets[i+1]), rank ranks[i], from line lines[i]. */
typedef struct tki_rank_list {
    uint8_t *bytes;
    uint64_t *offsets;
    uint32_t *ranks;
    uint64_t *lines;
    uint32_t count;
} tki_rank_list;

/*
 * Parses and checks a whole rank file (duplicates included) into *out_list,
 * which tki_rank_list_free releases.  TKI_ERR_MALFORMED_LINE,
 * TKI_ERR_BAD_BASE64, TKI_ERR_RANK_RANGE, TKI_ERR_NO_TOKENS,
 * TKI_ERR_DUPLICATE_BYTES, TKI_ERR_DUPLICATE_RANK or TKI_ERR_NOMEM leave the
 * list empty.  out_error may be NULL.
 */
int32_t tki_rank_file_parse(const uint8_t *text, size_t len, tki_rank_list *out_list,
                            tki_rank_file_error *out_error);
void tki_rank_list_free(tki_rank_list *list);

/*
 * tki_vocab_build over the tokens of a rank file, without an intermediate
 * copy for the caller to make.  The file's problems are reported as by
 * tki_rank_file_parse; a problem of the vocabulary as by tki_vocab_build
 * (*error_index is then a token's index in file order, and error->line its
 * line).  out_error and error_index may be NULL.
 */
int32_t tki_vocab_build_from_rank_file(const uint8_t *text, size_t len,
                                       const uint8_t *special_bytes,
                                       const uint64_t *special_offsets,
                                       const uint32_t *special_ranks, uint32_t special_count,
                                       tki_vocab **out_vocab, tki_rank_file_error *out_error,
                                       uint32_t *error_index);

typedef struct tki_vocab_info {
    uint32_t token_count;          /* mergeable tokens                          */
    uint32_t special_count;
    uint32_t max_rank;             /* largest rank, mergeable or special        */
    uint32_t max_token_bytes;      /* longest mergeable token                   */
    uint32_t noncanonical_count;   /* tokens plain BPE never produces           */
    uint32_t improper_count;       /* tokens whose merges go down in rank alone */
    uint32_t incremental;          /* 1: incremental algorithm; 0: heap fallback */
    uint32_t automaton_states;
    uint32_t automaton_tiles;
    uint32_t longest_suffix_chain;
    uint64_t decomposition_nodes;
    uint64_t memory_bytes;         /* tables owned by the vocabulary            */
    uint32_t sparse_ids;           /* 1: the mergeable ranks are far apart, and  */
                                   /*   the tables hold them renumbered (every   */
                                   /*   id in and out is still the caller's)     */
    uint32_t moved_rules;          /* rules the properization gave a new place  */
    uint32_t watched_tokens;       /* tokens whose pieces take the exact step   */
    uint32_t properization_rejects;/* of them, those its check refused (0 expected) */
} tki_vocab_info;

void tki_vocab_get_info(const tki_vocab *vocab, tki_vocab_info *out_info);

/*
 * Every id that decodes, with its length in bytes: the mergeable tokens' ids
 * ascending, then the special tokens' ascending (never a mergeable token's id:
 * the build refuses that).  Writes them to out_ids and out_lengths (capacity token_count +
 * special_count suffices, else TKI_ERR_ARGUMENT) and their number to *out_count.
 */
int32_t tki_vocab_list_ids(const tki_vocab *vocab, uint32_t *out_ids, uint32_t *out_lengths,
                           size_t capacity, size_t *out_count);

/*
 * A hint for a large block about to be written for the first time: on Linux,
 * its whole 2 MiB pages are marked MADV_HUGEPAGE, so that it is faulted in
 * 2 MiB at a time, not 4 KiB (table_memory.c).  No effect elsewhere, or where
 * the kernel declines; memory may be NULL.
 */
void tki_advise_huge_pages(void *memory, size_t size);

/*
 * The length of the longest prefix of data[0..len) that is UTF-8 as CPython's
 * decoder accepts it (len itself when all of it is): no overlong forms,
 * surrogates or code points past U+10FFFF; a character cut by the end is not
 * in the prefix (utf8.c).
 */
size_t tki_utf8_valid_prefix(const uint8_t *data, size_t len);

/* Flags for tki_encode_pieces. */
#define TKI_WHOLE_PIECE_SHORTCUT 1u /* a piece that is itself a token is that token */
#define TKI_METHOD_LINEAR 2u        /* incremental step with the linear suffix scan  */
#define TKI_METHOD_HEAP 4u          /* plain heap BPE (the reference semantics)       */

/*
 * Encodes `piece_count` pieces laid end to end in data[0..data_len): piece k is
 * data[piece_ends[k-1] .. piece_ends[k]) (piece_ends[-1] = 0, ends ascending,
 * the last equal to data_len).  Writes token ids to out (capacity
 * out_capacity >= data_len suffices: a token covers at least one byte) and
 * their number to *out_count.  Without a METHOD flag the centroid search is
 * used (or the heap BPE, for a vocabulary that is not incremental).
 */
int32_t tki_encode_pieces(const tki_vocab *vocab, const uint8_t *data, size_t data_len,
                          const size_t *piece_ends, size_t piece_count, uint32_t flags,
                          uint32_t *out, size_t out_capacity, size_t *out_count);

/*
 * For every prefix data[0..i+1) writes the rank of the last token of its BPE
 * (no shortcut) to out_last_token[i].  flags: 0 (centroid) or TKI_METHOD_LINEAR.
 * TKI_ERR_ARGUMENT for a vocabulary that is not incremental.
 */
int32_t tki_prefix_last_tokens(const tki_vocab *vocab, const uint8_t *data, size_t data_len,
                               uint32_t flags, uint32_t *out_last_token);

/*
 * For every byte end i of data, the rank of the last token of the BPE (without
 * the whole-piece shortcut) of the first i bytes of i's piece -- the pieces of
 * `pattern` (a TKI_PATTERN_*; 0: data is one piece) -- to out_last_token[i - 1].
 * flags: 0 or TKI_METHOD_LINEAR, and TKI_PREFIX_SLOT_BEFORE when the entry
 * before out_last_token[0] is the caller's too (it is then used while a long
 * piece is stepped straight into the output, and put back).  TKI_ERR_ARGUMENT
 * for a vocabulary that is not incremental.
 */
#define TKI_PREFIX_SLOT_BEFORE 8u
int32_t tki_prefix_pass(const tki_vocab *vocab, int32_t pattern, const uint8_t *data, size_t data_len,
                        uint32_t flags, uint32_t *out_last_token);

/* The built-in pre-split patterns (tiktoken's regexes, implemented in C). */
#define TKI_PATTERN_R50K 1   /* r50k_base, p50k_base, p50k_edit, gpt2 */
#define TKI_PATTERN_CL100K 2 /* cl100k_base                           */
#define TKI_PATTERN_O200K 3  /* o200k_base, o200k_harmony             */

/*
 * Splits data[0..data_len) as `regex.findall(pattern, text)` would, writing
 * the byte end of each piece to piece_ends (capacity >= data_len suffices).
 */
int32_t tki_pretokenize(int32_t pattern, const uint8_t *data, size_t data_len,
                        size_t *piece_ends, size_t capacity, size_t *out_count);

/*
 * tiktoken's encode_ordinary in one call: pre-split with a built-in pattern,
 * then each piece with the whole-piece shortcut and BPE (flags as for
 * tki_encode_pieces; the shortcut is always on).  out_capacity >= data_len.
 * *out_last_piece_tokens gets the number of tokens of the last piece (for
 * tiktoken's unstable-token logic); it may be NULL.
 */
int32_t tki_encode_text(const tki_vocab *vocab, int32_t pattern, const uint8_t *data,
                        size_t data_len, uint32_t flags, uint32_t *out, size_t out_capacity,
                        size_t *out_count, size_t *out_last_piece_tokens);

/*
 * tki_encode_text with its settings held in a struct, for callers that make
 * many short calls (a call from Python pays for each argument it passes).
 * The caller fills vocab, pattern, flags, out and out_capacity once; each
 * run encodes data[0..data_len) (data_len <= out_capacity) into out and
 * returns the number of ids, or minus a tki_status.
 */
typedef struct tki_encode_job {
    const tki_vocab *vocab;
    int32_t pattern;
    uint32_t flags;
    uint32_t *out;
    size_t out_capacity;
    size_t last_piece_tokens; /* set by each run */
} tki_encode_job;

int64_t tki_encode_job_run(tki_encode_job *job, const uint8_t *data, size_t data_len);

/*
 * Many texts in one call (a batch): text i is data[text_ends[i-1] .. text_ends[i])
 * (text_ends[-1] taken as 0), each encoded on its own.  The ids of all texts go
 * to job->out one after another (out_capacity >= text_ends[text_count - 1]);
 * token_ends[i] gets the number of ids of texts 0..i.  Returns the total
 * number of ids, or minus a tki_status.
 */
int64_t tki_encode_job_run_many(tki_encode_job *job, const uint8_t *data, const size_t *text_ends,
                                size_t text_count, uint64_t *token_ends);

/*
 * Custom pre-split patterns (pattern.c).  A program, compiled from a pattern
 * by tiktoken_inc/_pattern.py, splits text exactly as tiktoken's regex engine
 * splits it with that pattern, in time linear in the text.  tki_pattern_load
 * checks a program (TKI_ERR_ARGUMENT for a malformed one, or one the matcher
 * cannot split with in linear time) and builds an immutable matcher that any
 * number of threads may share.
 */
typedef struct tki_pattern tki_pattern;

int32_t tki_pattern_load(const uint8_t *program, size_t program_len, tki_pattern **out_pattern);
void tki_pattern_free(tki_pattern *pattern);

/*
 * Lets encoding with `pattern` (one-shot, and the pieces of a stream's text
 * that the next bytes cannot change) split with a built-in pattern's C
 * splitter (TKI_PATTERN_R50K, _CL100K or _O200K), which reads text several
 * times faster than a compiled automaton, and keep the compiled matcher for
 * the piece that the built-in one ends at the end of the text, and for a
 * stream's open piece.  The caller
 * vouches that at every position the two match the same piece unless the
 * built-in pattern's piece reaches the end of the text (the compiled pattern
 * is the built-in one without its end-anchored alternatives, such as \s++$:
 * tiktoken_inc/_pattern.py checks it on the two automata).  0 undoes it.
 * Call it before the pattern is shared.  TKI_ERR_ARGUMENT for another value
 * (the pattern is then unchanged).
 */
int32_t tki_pattern_use_builtin(tki_pattern *pattern, int32_t builtin);

/* tki_pretokenize with a compiled pattern. */
int32_t tki_pattern_pretokenize(const tki_pattern *pattern, const uint8_t *data, size_t data_len,
                                size_t *piece_ends, size_t capacity, size_t *out_count);

/* tki_encode_text with a compiled pattern (each piece with the whole-piece shortcut). */
int32_t tki_pattern_encode(const tki_vocab *vocab, const tki_pattern *pattern, const uint8_t *data,
                           size_t data_len, uint32_t flags, uint32_t *out, size_t out_capacity,
                           size_t *out_count, size_t *out_last_piece_tokens);

/*
 * The classes of characters the pattern tells apart (its atoms) and one
 * character of each (a code point; atoms of no character, such as surrogates,
 * are left out): the pieces of a text depend only on the sequence of its
 * characters' classes.  TKI_ERR_ARGUMENT if capacity is too small
 * (tki_pattern_atom_count() always suffices).
 */
uint32_t tki_pattern_atom_count(const tki_pattern *pattern);
int32_t tki_pattern_representatives(const tki_pattern *pattern, uint32_t *out, size_t capacity,
                                    size_t *out_count);

/*
 * Special tokens (special_tokens.c).  A matcher is an immutable set of
 * non-empty byte strings, built once and shared by any number of threads.
 * A search finds the leftmost occurrence; where several strings start there,
 * the longest.  Successive occurrences do not overlap: the next search starts
 * where the previous occurrence ends.  Time is linear in the text.
 *   bytes/offsets: `count` strings laid end to end, string i being
 *     bytes[offsets[i] .. offsets[i+1]); ids[i] is what tki_encode_with_specials
 *     writes for string i (ids may be NULL: the index i).  TKI_ERR_EMPTY_TOKEN
 *     for an empty string, TKI_ERR_DUPLICATE_BYTES for a repeated one, with
 *     *error_index naming it (error_index may be NULL).
 */
typedef struct tki_special_matcher tki_special_matcher;

int32_t tki_special_matcher_build(const uint8_t *bytes, const uint64_t *offsets,
                                  const uint32_t *ids, uint32_t count,
                                  tki_special_matcher **out_matcher, uint32_t *error_index);
void tki_special_matcher_free(tki_special_matcher *matcher);

/*
 * Finds up to `capacity` successive occurrences in data[from..data_len):
 * writes the start of each to out_starts and the index of its string to
 * out_strings, and their number to *out_count (0: none).  To go on, search
 * again from the end of the last one.
 */
int32_t tki_special_matcher_find(const tki_special_matcher *matcher, const uint8_t *data,
                                 size_t data_len, size_t from, size_t *out_starts,
                                 uint32_t *out_strings, size_t capacity, size_t *out_count);

/*
 * tiktoken's encode with allowed special tokens in one call: the strings of
 * `specials` (NULL: none) found in data become their ids, and each stretch
 * between them is encoded on its own -- pre-split with a built-in pattern and
 * encoded as tki_encode_text does, or, for pattern 0, as one piece with the
 * whole-piece shortcut.  flags: a METHOD flag or 0.  out_capacity >= data_len
 * suffices.  *out_last_piece_tokens (may be NULL) gets the number of tokens
 * of the last piece, 0 when the text ends with a special token (tiktoken's
 * unstable-token logic).
 */
int32_t tki_encode_with_specials(const tki_vocab *vocab, int32_t pattern,
                                 const tki_special_matcher *specials, const uint8_t *data,
                                 size_t data_len, uint32_t flags, uint32_t *out,
                                 size_t out_capacity, size_t *out_count,
                                 size_t *out_last_piece_tokens);
/* tki_encode_with_specials with a compiled pattern. */
int32_t tki_pattern_encode_with_specials(const tki_vocab *vocab, const tki_pattern *pattern,
                                         const tki_special_matcher *specials, const uint8_t *data,
                                         size_t data_len, uint32_t flags, uint32_t *out,
                                         size_t out_capacity, size_t *out_count,
                                         size_t *out_last_piece_tokens);

/* The id of string i of a matcher, and its length in bytes. */
uint32_t tki_special_matcher_id(const tki_special_matcher *matcher, uint32_t string);
size_t tki_special_matcher_length(const tki_special_matcher *matcher, uint32_t string);

/*
 * The leftmost position p >= from (among the last longest - 1 of data) where
 * data[p..data_len) is a proper prefix of some string: where a string may
 * still start if the text goes on; data_len if there is none.
 */
size_t tki_special_matcher_open_start(const tki_special_matcher *matcher, const uint8_t *data,
                                      size_t data_len, size_t from);

/*
 * Streaming encoder with eager output (stream.c).  Feed text in any chunks (a
 * cut may fall inside a UTF-8 character or a special token); each call writes
 * the ids that have become final -- no continuation of the text can change
 * them -- and tki_stream_finish the rest.  The concatenated ids equal
 * tki_encode_with_specials of the whole input with `allowed` (may be NULL),
 * whose strings become their ids; a string of `refused` (may be NULL) in the
 * text fails the stream with TKI_ERR_REFUSED_SPECIAL once it is certain.
 * pattern: TKI_PATTERN_*, or 0 (each stretch between specials is one piece).
 * The matchers must outlive the stream.  An output capacity of
 * tki_stream_pending() + the fed length + 1 always suffices.  After finish the
 * stream is empty and may be fed again.  flags: 0, TKI_METHOD_LINEAR or
 * TKI_METHOD_HEAP.
 *
 * tki_stream_feed checks that the bytes are UTF-8 (TKI_ERR_INVALID_UTF8 at
 * the first that is not; finish: at a character cut at the end);
 * tki_stream_feed_checked skips that check when is_utf8 (the caller vouches
 * for them, e.g. a str's UTF-8).
 *
 * One thread at a time: a call that finds the stream in use by another
 * returns TKI_ERR_BUSY and changes nothing.  After any other error every later
 * call returns TKI_ERR_STREAM_FAILED; tki_stream_get_error tells the first.
 */
typedef struct tki_stream tki_stream;

typedef struct tki_stream_stats {
    uint64_t bytes_fed;
    uint64_t tokens_emitted;
    uint64_t pending_bytes;     /* fed, not yet covered by an emitted id        */
    uint64_t max_pending_bytes; /* the most that was pending after any call     */
    uint64_t live_ends;         /* prefix ends of the open piece not yet emitted */
} tki_stream_stats;

/* What ended a stream: the status, and for some of them where and why. */
typedef struct tki_stream_error {
    int32_t status;             /* TKI_OK: the stream has not failed             */
    uint32_t reason;            /* TKI_ERR_INVALID_UTF8: 1 invalid start byte,
                                   2 invalid continuation byte, 3 unexpected end */
    uint64_t offset;            /* stream offset of the bad sequence, or of the
                                   refused string                               */
    uint32_t byte;              /* TKI_ERR_INVALID_UTF8: the byte at offset      */
    uint32_t special_string;    /* TKI_ERR_REFUSED_SPECIAL: its index in refused */
} tki_stream_error;

int32_t tki_stream_new(const tki_vocab *vocab, int32_t pattern, uint32_t flags,
                       tki_stream **out_stream);
int32_t tki_stream_new_with_specials(const tki_vocab *vocab, int32_t pattern,
                                     const tki_special_matcher *allowed,
                                     const tki_special_matcher *refused, uint32_t flags,
                                     tki_stream **out_stream);
/* The same with a compiled pattern (which must outlive the stream). */
int32_t tki_stream_new_compiled(const tki_vocab *vocab, const tki_pattern *pattern,
                                const tki_special_matcher *allowed,
                                const tki_special_matcher *refused, uint32_t flags,
                                tki_stream **out_stream);
void tki_stream_free(tki_stream *stream);
int32_t tki_stream_feed(tki_stream *stream, const uint8_t *data, size_t len, uint32_t *out,
                        size_t out_capacity, size_t *out_count);
int32_t tki_stream_feed_checked(tki_stream *stream, const uint8_t *data, size_t len,
                                int32_t is_utf8, uint32_t *out, size_t out_capacity,
                                size_t *out_count);
int32_t tki_stream_finish(tki_stream *stream, uint32_t *out, size_t out_capacity,
                          size_t *out_count);
uint64_t tki_stream_pending(const tki_stream *stream);
void tki_stream_get_stats(const tki_stream *stream, tki_stream_stats *out_stats);
void tki_stream_get_error(const tki_stream *stream, tki_stream_error *out_error);

/*
 * Encodes (or counts) with a cap: a stream over data, fed block by block,
 * that stops as soon as more than max_tokens ids are certain, having read the
 * input only up to that point plus the unresolved window.  out (capacity
 * min(max_tokens + 1, data_len)) receives the first ids, or may be NULL to
 * count only.  *out_count: the number of ids, or max_tokens + 1 with
 * *out_exceeded = 1.  *out_consumed: bytes read.  pattern as for
 * tki_stream_new; max_tokens UINT64_MAX for no cap.  data must be UTF-8.
 * tki_encode_bounded_specials does the same with special tokens as the stream
 * does them; on TKI_ERR_REFUSED_SPECIAL, *out_error (may be NULL) says which.
 */
int32_t tki_encode_bounded(const tki_vocab *vocab, int32_t pattern, const uint8_t *data,
                           size_t data_len, uint64_t max_tokens, uint32_t *out,
                           uint64_t *out_count, size_t *out_consumed, int32_t *out_exceeded);
/*
 * The same on a stream the caller made (any pattern, compiled ones included),
 * which must be empty (new, or finished); it is empty again after a success,
 * and failed after an error (tki_stream_get_error says why).
 */
int32_t tki_stream_bounded(tki_stream *stream, const uint8_t *data, size_t data_len,
                           uint64_t max_tokens, uint32_t *out, uint64_t *out_count,
                           size_t *out_consumed, int32_t *out_exceeded);
int32_t tki_encode_bounded_specials(const tki_vocab *vocab, int32_t pattern,
                                    const tki_special_matcher *allowed,
                                    const tki_special_matcher *refused, const uint8_t *data,
                                    size_t data_len, uint64_t max_tokens, uint32_t *out,
                                    uint64_t *out_count, size_t *out_consumed,
                                    int32_t *out_exceeded, tki_stream_error *out_error);

/*
 * The longest prefix of data (on a character boundary) whose encoding, with
 * the specials of the stream, has at most max_tokens ids and is the start of
 * the encoding of data: writes those ids to out (capacity max_tokens), their
 * number to *out_count and the prefix's bytes to *out_prefix_len.  Reads data
 * only up to where more than max_tokens ids are certain.  Errors as
 * tki_encode_bounded_specials.
 */
int32_t tki_truncate(const tki_vocab *vocab, int32_t pattern, const tki_special_matcher *allowed,
                     const tki_special_matcher *refused, const uint8_t *data, size_t data_len,
                     uint64_t max_tokens, uint32_t *out, uint64_t *out_count, size_t *out_prefix_len,
                     tki_stream_error *out_error);
/* The same on an empty stream the caller made (as tki_stream_bounded). */
int32_t tki_stream_truncate(tki_stream *stream, const uint8_t *data, size_t data_len,
                            uint64_t max_tokens, uint32_t *out, uint64_t *out_count,
                            size_t *out_prefix_len);

/*
 * A text that the bounded calls read as they go, for a caller that makes it
 * on demand (the UTF-8 of a Python str, converted only as far as a call with
 * a cap reads).  more(context, wanted, &data, &length, &complete) makes at
 * least the first `wanted` bytes of the text ready (all of it, *complete = 1,
 * if it is shorter), whole characters only, and returns the text so far:
 * data[0..length), contiguous from its start (data may move between calls;
 * the bytes once given do not change).  A status other than TKI_OK ends the
 * call with that status.
 */
typedef struct tki_text_source {
    int32_t (*more)(void *context, size_t wanted, const uint8_t **data, size_t *length,
                    int32_t *complete);
    void *context;
} tki_text_source;

/*
 * tki_stream_bounded and tki_stream_truncate on a text read from `source`:
 * the same answers as on the whole text.  out's capacity: max_tokens + 1 and
 * max_tokens (the text's length is not known ahead).
 */
int32_t tki_stream_bounded_source(tki_stream *stream, const tki_text_source *source,
                                  uint64_t max_tokens, uint32_t *out, uint64_t *out_count,
                                  size_t *out_consumed, int32_t *out_exceeded);
int32_t tki_stream_truncate_source(tki_stream *stream, const tki_text_source *source,
                                   uint64_t max_tokens, uint32_t *out, uint64_t *out_count,
                                   size_t *out_prefix_len);

/*
 * The built tables as one flat image (for an on-disk cache): its size, then
 * the bytes.  tki_vocab_read_image checks the image (format, this build's
 * struct sizes, a checksum of every byte, then every table: offsets and
 * lengths in bounds, ids in range, and the structure the encoders' loops
 * rely on) and returns a vocabulary whose tables point into it: `image`
 * must be 64-byte aligned (a mapping of a file is) and outlive the
 * vocabulary.  A damaged, crafted or foreign image is TKI_ERR_ARGUMENT:
 * rebuild it.  An image holds the mergeable tokens' tables only: a read
 * vocabulary has no special tokens until tki_vocab_set_specials gives it
 * some, so vocabularies that differ only in them share one image.
 */
int32_t tki_vocab_image_size(const tki_vocab *vocab, uint64_t *out_size);
int32_t tki_vocab_write_image(const tki_vocab *vocab, uint8_t *out, uint64_t size);
int32_t tki_vocab_read_image(const uint8_t *image, uint64_t size, tki_vocab **out_vocab);

/*
 * The same image in pieces, to write a file without a contiguous copy: the
 * header (tki_vocab_image_header: with out NULL, only its size), then for
 * index 0, 1, ... until TKI_ERR_ARGUMENT, piece `index`: *out_size bytes at
 * *out_data followed by *out_padding zero bytes.  Their concatenation is what
 * tki_vocab_write_image writes.
 */
int32_t tki_vocab_image_header(const tki_vocab *vocab, uint8_t *out, uint64_t capacity,
                               uint64_t *out_size);
int32_t tki_vocab_image_piece(const tki_vocab *vocab, uint32_t index, const uint8_t **out_data,
                              uint64_t *out_size, uint64_t *out_padding);

/*
 * tki_vocab_read_image for an image that is a read-only mapping of a file:
 * on Linux the pages the check has read are dropped from the process as it
 * goes (they stay in the page cache, and come back when the tables are
 * used), so checking does not make the whole file resident in this process.
 */
int32_t tki_vocab_read_mapped_image(const uint8_t *image, uint64_t size, tki_vocab **out_vocab);

/*
 * Recomputes the checksum in an image's header from its payload, in place,
 * for tools and tests that make images by hand; a sealed image is still
 * checked table by table when it is read.  TKI_ERR_ARGUMENT when the header
 * is not of this format or does not match `size`.
 */
int32_t tki_vocab_image_seal(uint8_t *image, uint64_t size);

/* Rank of exactly these bytes as a mergeable token, or TKI_ERR_UNKNOWN_TOKEN. */
int32_t tki_token_rank(const tki_vocab *vocab, const uint8_t *bytes, size_t len,
                       uint32_t *out_rank);

/* Bytes of a rank (mergeable or special); TKI_ERR_UNKNOWN_TOKEN if it has none. */
int32_t tki_token_bytes(const tki_vocab *vocab, uint32_t rank, const uint8_t **out_bytes,
                        size_t *out_len);

/*
 * Decoding in two calls: tki_decoded_length sums the lengths (or names the
 * first unknown token in *bad_index), tki_decode writes the bytes.
 */
int32_t tki_decoded_length(const tki_vocab *vocab, const uint32_t *tokens, size_t count,
                           size_t *out_len, size_t *bad_index);
int32_t tki_decode(const tki_vocab *vocab, const uint32_t *tokens, size_t count,
                   uint8_t *out, size_t out_capacity, size_t *out_len, size_t *bad_index);

#ifdef __cplusplus
}
#endif
#endif /* TIKTOKEN_INC_H */
