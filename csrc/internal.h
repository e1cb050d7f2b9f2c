/*
 * internal.h — the layout of a built vocabulary, shared by the core's .c files.
 *
 * Not installed and not part of the API: tiktoken_inc.h is.  Each table is
 * owned by the file that builds it:
 *   rank_file.c       reading `.tiktoken` rank files into the build's arrays
 *   token_table.c     token bytes, ranks, the bytes -> rank hash, decoding
 *   reference_bpe.c   tiktoken's merge rule with a heap (build oracle, fallback)
 *   token_order.c     the mergeable tokens in byte order (a build-time index)
 *   vocab_build.c     canonical tokens, properness, successor forest, intervals
 *   properize.c       rule priorities for a vocabulary that is not proper, and
 *                     the tokens it cannot vouch for (watched)
 *   exact_step.c      the step of a piece that holds a watched token
 *   automaton.c       Aho-Corasick automaton over canonical tokens (rows and tiles)
 *   centroid.c        centroid decompositions of every token's suffix tree
 *   pretokenize.c     tiktoken's regex pre-split for the built-in patterns
 *   pattern.c         compiled custom patterns (programs from tiktoken_inc/_pattern.py)
 *   unicode_tables.c  the character classes it reads (generated)
 *   steps.c           the steps of one piece (the step itself is in step.h),
 *                     resumable, and its tokens read back from them
 *   encode.c          the engine: a text's pieces in batches (whole-token
 *                     lookups, short pieces in lanes, long ones stepped),
 *                     and the one-shot entry points
 *   piece_memo.c      the ranks of short pieces that are no token, kept
 *                     across calls (a pool of memos per vocabulary)
 *   stream.c          the engine fed in chunks: eager output, special tokens,
 *                     and the bounded calls (count, cap, truncate)
 *   image.c           the tables as one checksummed image (an on-disk cache)
 *   image_check.c     every table of a read image checked before it is used
 *   table_memory.c    memory for the big tables (huge pages where Linux offers them)
 */
#ifndef TIKTOKEN_INC_INTERNAL_H
#define TIKTOKEN_INC_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tiktoken_inc.h"

/* SSE2 where the machine has it; -DTKI_NO_SIMD keeps the plain C (.ci/sanitize.sh tests both). */
#if defined(__SSE2__) && !defined(TKI_NO_SIMD)
#define TKI_SSE2 1
#include <emmintrin.h>
#endif

/* A hint to start loading a cache line that is needed soon (no effect elsewhere). */
#if defined(__GNUC__) || defined(__clang__)
#define TKI_PREFETCH(address) __builtin_prefetch(address)
#else
#define TKI_PREFETCH(address) ((void)(address))
#endif

/* For a small function in a hot loop that the compiler might leave as a call, and
 * for a rare path that it might copy into one. */
#if defined(__GNUC__) || defined(__clang__)
#define TKI_ALWAYS_INLINE inline __attribute__((always_inline))
#define TKI_NOINLINE __attribute__((noinline)) /* a rare path kept out of a hot loop */
#else
#define TKI_ALWAYS_INLINE inline
#define TKI_NOINLINE
#endif

#define TKI_NONE UINT32_MAX   /* "no token" / "no state" */
#define TKI_TILE_WIDTH 16u     /* words of a block: a row, or a tile (the next states for one high nibble) */

/*
 * What the per-byte step reads about a token, packed so that one cache line
 * serves the whole interval test.  Indexed by rank.
 */
typedef struct tki_token_rule {
    uint32_t valid_lo;    /* I(z) = [valid_lo, valid_hi) over forest ids        */
    uint32_t valid_hi;
    uint32_t forest_in;   /* pre-order id in the successor forest (0: none)     */
    uint16_t length;      /* bytes                                               */
    uint16_t suc_length;  /* bytes of suc(z); 0 for an atomic (one-byte) token   */
} tki_token_rule;

/*
 * One node of a token's centroid decomposition.  A token's nodes form one
 * block; a node's entries (the parts below its centroid, sorted by key_lo,
 * then the part above it if has_up) are block[first_entry ...].
 */
typedef struct tki_decomposition_node {
    uint32_t token;        /* the centroid u of this part                        */
    uint32_t key_lo;       /* I(v) of the node v of this part adjacent to the    */
    uint32_t key_hi;       /*   parent's centroid (unused for the first node)    */
    uint16_t first_entry;
    uint16_t entries;      /* low 15 bits: parts below u; top bit: has an up part */
} tki_decomposition_node;

#define TKI_ENTRY_COUNT(node) ((uint32_t)((node)->entries & 0x7fffu))
#define TKI_HAS_UP(node) (((node)->entries & 0x8000u) != 0)

/*
 * A slot of the bytes -> rank hash.  It holds the key's first eleven bytes
 * (eight in the head, three in the middle word beside the length), so a
 * lookup of a key of up to eleven bytes (nearly all regex pieces) touches one
 * cache line and never the pool.
 */
typedef struct tki_hash_slot {
    uint64_t head;    /* the first min(8, length) bytes, zero-padded, little-endian  */
    uint32_t rank;    /* TKI_NONE: empty                                             */
    uint32_t middle;  /* min(length, 255), then bytes 8..10 (zero-padded) above it   */
} tki_hash_slot;

/* Per-rank token kinds (special tokens are apart: below). */
enum {
    TKI_KIND_ABSENT = 0,
    TKI_KIND_MERGEABLE = 1
};

/*
 * Per-rank rule flags.  IMPROPER: a canonical token whose merges, alone, go
 * down in rank (properize.c gives the rules new priorities).  WATCHED: a
 * canonical token for which properize.c found no priorities; WATCHED_SUFFIX:
 * a canonical token with a watched canonical suffix (itself included).
 */
enum {
    TKI_FLAG_CANONICAL = 1,
    TKI_FLAG_IMPROPER = 2,
    TKI_FLAG_WATCHED = 4,
    TKI_FLAG_WATCHED_SUFFIX = 8
};

/* piece_memo.h: a memo's shape; piece_memo.c: the pool. */
enum {
    TKI_MEMO_SLOTS = 1 << 12,    /* slots of a memo (64 bytes each)                  */
    TKI_MEMO_PIECE_BYTES = 27,   /* the longest piece kept                           */
    TKI_MEMO_RANKS = 8,          /* the most ranks a kept piece has                  */
    TKI_MEMO_POOL = 16           /* memos per vocabulary at most                     */
};
typedef struct tki_piece_memo tki_piece_memo;
typedef struct tki_memo_pool_entry {
    _Atomic(tki_piece_memo *) memo;
    uint8_t padding[64 - sizeof(void *)]; /* one cache line per entry: threads do not share one */
} tki_memo_pool_entry;

/*
 * Ranks and ids.  Every table is indexed by rank, and rank order is merge
 * priority.  The caller names a token by its id (the rank it gave: what encode
 * writes and decode reads).  Where the ids are dense (at most about twice as
 * many as the tokens: every vocabulary tiktoken ships) each id is its own rank,
 * a missing one an absent rank.  Where they are far apart (a rank of 10^9
 * among a few hundred tokens) the tokens are renumbered 0..token_count-1 in
 * the order of their ids, so every table is sized by the number of tokens,
 * and token_id gives each rank's id back; ascending, it is also the inverse
 * map, by binary search (tki_rank_of_id).  The core works in ranks; ids go out
 * where the encoders hand their output over (tki_ranks_to_ids: the one-shot
 * entry points, the special-token loop, the stream's emits, the prefix passes)
 * and come in where a caller's id is read (decoding, a special token's id).
 */
struct tki_vocab {
    uint32_t borrowed;          /* image.c: the tables live in the caller's image */

    /* token_table.c: the mergeable tokens */
    uint32_t rank_limit;        /* ranks are 0..rank_limit - 1: every per-rank array has this size */
    uint32_t token_count;
    uint32_t sparse_ids;        /* 1: ranks renumbered, token_id holds the ids; 0: ids are ranks */
    uint32_t *token_id;         /* by rank, ascending: the token's id (NULL unless sparse_ids) */
    uint32_t max_token_bytes;
    uint8_t *pool;              /* the mergeable tokens' bytes                   */
    uint64_t *token_offset;     /* by rank: start in pool                        */
    uint32_t *token_length;     /* by rank                                       */
    uint8_t *token_kind;        /* by rank: TKI_KIND_*                           */
    tki_hash_slot *hash_slots;  /* open addressing over mergeable tokens         */
    uint64_t hash_mask;

    /*
     * token_table.c: the special tokens, which only decode.  Apart from the
     * mergeable tables, and owned by the vocabulary even when those are an
     * image's: an image holds no special tokens, so vocabularies that differ
     * only in them share one (tki_vocab_set_specials adds them after reading).
     * An id decodes as its mergeable token if it has one, else as its special.
     */
    uint32_t special_count;
    uint32_t *special_id;       /* ascending                                     */
    uint64_t *special_offset;   /* special_count + 1: special i is               */
    uint8_t *special_pool;      /*   special_pool[special_offset[i] .. [i + 1])  */

    /* vocab_build.c */
    uint8_t *rule_flags;        /* by rank: TKI_FLAG_*                           */
    uint32_t noncanonical_count;
    uint32_t longest_noncanonical; /* bytes of the longest non-canonical token (0: none) */
    uint32_t improper_count;
    uint32_t incremental;
    /* properize.c */
    uint32_t moved_count;       /* rules whose priority is not their rank's place */
    uint32_t watched_count;     /* tokens the incremental step cannot vouch for  */
    uint32_t properization_rejects; /* of them, those the check after the build found */
    tki_token_rule *rule;       /* by rank                                       */

    /* automaton.c */
    uint32_t state_count;
    uint32_t automaton_blocks;  /* blocks of TKI_TILE_WIDTH words: rows and tiles  */
    uint32_t *automaton;        /* a state's row, then the tiles it owns          */
                                /*   (tki_automaton_next); a state's id is the    */
                                /*   index of its row's block                      */
    uint16_t *block_keys;       /* by block, and one past the last: the role of  */
                                /*   each block, for checking images (below)      */
    uint32_t *suffix_parent;    /* by rank: longest proper canonical suffix      */
    uint32_t longest_suffix_chain;

    /* centroid.c */
    uint32_t *decomposition_start; /* by rank: first node of its block           */
    tki_decomposition_node *decomposition;
    uint64_t decomposition_nodes;

    /*
     * piece_memo.c: the memos not in use (NULL: taken, or not made), each on a
     * cache line of its own, and how many exist.  The one part of a vocabulary
     * that encoding changes, and only through atomics: any number of threads
     * may share a vocabulary.
     */
    tki_memo_pool_entry memo_pool[TKI_MEMO_POOL];
    atomic_uint memos_made;
};

/*
 * piece_memo.c: a memo of the ranks of short pieces (piece_memo.h), lent to one
 * call at a time.  tki_memo_take gives one of the vocabulary's (made on first
 * need, at most TKI_MEMO_POOL of them, 256 KiB each), or NULL when all are in
 * use or memory is short: the call then steps every piece, with the same
 * ranks.  tki_memo_give_back returns it (NULL: nothing).  tki_memo_pool_free
 * frees those not in use (tki_vocab_free, tki_vocab_forget_pieces).
 */
tki_piece_memo *tki_memo_take(const struct tki_vocab *vocab);
void tki_memo_give_back(const struct tki_vocab *vocab, tki_piece_memo *memo);
void tki_memo_pool_free(struct tki_vocab *vocab);

/* table_memory.c: malloc for a big table, hinted to use huge pages; free() frees it. */
void *tki_table_alloc(size_t size);

/*
 * From pos, just after n bytes (data[pos - n..pos)), the end of the whole
 * copies of them that follow: bytes equal to the ones n before them, 64
 * (SSE2), 32 and then 8 at a compare; pos plus a multiple of n.  A run of one
 * character (hostile text) costs a compare per few bytes, not a decode per
 * character (the pre-tokenizer's runs, the UTF-8 check's).
 */
static inline size_t tki_copies_end(const uint8_t *data, size_t pos, size_t len, size_t n) {
    size_t end = pos;
#ifdef TKI_SSE2
    while (len - end >= 64) {
        const __m128i *now = (const __m128i *)(data + end), *before = (const __m128i *)(data + end - n);
        __m128i differ = _mm_or_si128(
            _mm_or_si128(_mm_xor_si128(_mm_loadu_si128(now), _mm_loadu_si128(before)),
                         _mm_xor_si128(_mm_loadu_si128(now + 1), _mm_loadu_si128(before + 1))),
            _mm_or_si128(_mm_xor_si128(_mm_loadu_si128(now + 2), _mm_loadu_si128(before + 2)),
                         _mm_xor_si128(_mm_loadu_si128(now + 3), _mm_loadu_si128(before + 3))));
        if (_mm_movemask_epi8(_mm_cmpeq_epi8(differ, _mm_setzero_si128())) != 0xFFFF) {
            break;
        }
        end += 64;
    }
#endif
    while (len - end >= 32) {
        uint64_t now[4], before[4];
        memcpy(now, data + end, 32);
        memcpy(before, data + end - n, 32);
        if ((now[0] ^ before[0]) | (now[1] ^ before[1]) | (now[2] ^ before[2]) | (now[3] ^ before[3])) {
            break;
        }
        end += 32;
    }
    while (len - end >= 8) {
        uint64_t now, before;
        memcpy(&now, data + end, 8);
        memcpy(&before, data + end - n, 8);
        if (now != before) {
            break;
        }
        end += 8;
    }
    while (end < len && data[end] == data[end - n]) {
        end++;
    }
    return pos + (end - pos) / n * n;
}

/*
 * How many bytes from data[0] on are whole, valid UTF-8 characters by the fast
 * tests of utf8.c (ASCII in words, other characters whole where four bytes
 * remain): at most tki_utf8_valid_prefix(data, len), and less near the end or
 * before anything odd, which the caller then checks a byte at a time.
 */
size_t tki_utf8_whole_prefix(const uint8_t *data, size_t len);

/*
 * vocab_build.c: everything after the token table (rules, automaton,
 * centroid blocks), into a vocabulary whose token table is built.
 */
int32_t tki_vocab_derive_tables(struct tki_vocab *vocab);

/* token_table.c */
int32_t tki_token_table_build(struct tki_vocab *vocab, const uint8_t *token_bytes,
                              const uint64_t *token_offsets, const uint32_t *token_ranks,
                              uint32_t token_count, const uint8_t *special_bytes,
                              const uint64_t *special_offsets, const uint32_t *special_ranks,
                              uint32_t special_count, uint32_t *error_index);
void tki_token_table_free(struct tki_vocab *vocab); /* the special tokens too */
void tki_specials_free(struct tki_vocab *vocab);
/* Rank of data[0..len) as a mergeable token, or TKI_NONE. */
uint32_t tki_lookup_rank(const struct tki_vocab *vocab, const uint8_t *data, size_t len);

/* A lookup in progress (token_hash.h): the key's head and middle words and its first slot. */
typedef struct tki_hash_probe_state {
    uint64_t head;
    uint64_t slot;
    uint32_t middle;
} tki_hash_probe_state;

static inline const uint8_t *tki_token_data(const struct tki_vocab *vocab, uint32_t rank) {
    return vocab->pool + vocab->token_offset[rank];
}

/* The id of a rank (TKI_NONE stays TKI_NONE). */
static inline uint32_t tki_id_of_rank(const struct tki_vocab *vocab, uint32_t rank) {
    return vocab->sparse_ids && rank != TKI_NONE ? vocab->token_id[rank] : rank;
}

/* token_table.c: ids[i] = tki_id_of_rank(ids[i]) for i < count, for a sparse vocabulary. */
void tki_renumber_ranks(const struct tki_vocab *vocab, uint32_t *ids, size_t count);

/*
 * The ranks written to ids[0..count) become their ids: where the encoders'
 * output goes out.  Nothing to do (one test) where ids are ranks.
 */
static inline void tki_ranks_to_ids(const struct tki_vocab *vocab, uint32_t *ids, size_t count) {
    if (vocab->sparse_ids) {
        tki_renumber_ranks(vocab, ids, count);
    }
}

/* token_table.c: the rank of the mergeable token with this id, or TKI_NONE. */
uint32_t tki_rank_of_id(const struct tki_vocab *vocab, uint32_t id);

/* reference_bpe.c: scratch for the heap BPE of one piece of up to `capacity` bytes. */
typedef struct tki_heap_entry {
    uint32_t rank;
    uint32_t left;       /* start of the left part                     */
    uint32_t right;      /* start of the right part                    */
    uint32_t right_end;  /* end of the right part, when this was pushed */
} tki_heap_entry;

typedef struct tki_heap_workspace {
    size_t capacity;
    uint32_t *next_start;   /* by part start: start of the next part (or length) */
    uint32_t *prev_start;   /* by part start: start of the previous part        */
    uint8_t *alive;         /* by byte: a part starts here                       */
    tki_heap_entry *heap;   /* at most 3 * capacity entries                      */
} tki_heap_workspace;

/* What the heap BPE saw, for the build: the ranks (priorities) it merged, in order. */
typedef struct tki_merge_record {
    uint32_t merges;
    uint32_t ranks_descended;   /* some merge had a lower rank than the one before */
    uint32_t last_left_length;  /* bytes of the left operand of the last merge    */
} tki_merge_record;

int32_t tki_heap_workspace_init(tki_heap_workspace *work, size_t capacity);
void tki_heap_workspace_free(tki_heap_workspace *work);
/*
 * tiktoken's byte_pair_encode on piece[0..len) (len <= work->capacity,
 * len < 2^32): appends the ranks to out, sets *out_count.  record may be NULL.
 */
int32_t tki_heap_bpe(const struct tki_vocab *vocab, tki_heap_workspace *work,
                     const uint8_t *piece, size_t len, uint32_t *out, size_t *out_count,
                     tki_merge_record *record);
/*
 * The same with priority[rank] in place of each rank (by rank; TKI_NONE: the
 * token never merges); the ranks still come out.
 */
int32_t tki_heap_bpe_with_priorities(const struct tki_vocab *vocab, tki_heap_workspace *work,
                                     const uint32_t *priority, const uint8_t *piece, size_t len,
                                     uint32_t *out, size_t *out_count, tki_merge_record *record);

/*
 * properize.c: new rule priorities for a vocabulary with improper tokens
 * (pre and suc by rank, TKI_NONE for no rule).  tki_properize fills `out`
 * (priority: by rank, TKI_NONE for no rule; level: the highest rank + 1 among
 * the merges that make a rule) and flags the WATCHED tokens; the forest is
 * then numbered by those priorities.  tki_properize_finish, once the
 * automaton is built, checks each rule that holds a reordered one (watching
 * what fails), flags WATCHED_SUFFIX and marks the watched states' rows.  On
 * failure (TKI_ERR_NOMEM) the outputs are freed or left as they were.
 */
typedef struct tki_properization {
    uint32_t *priority;
    uint32_t *level;
} tki_properization;

int32_t tki_properize(struct tki_vocab *vocab, const uint32_t *pre, const uint32_t *suc,
                      tki_properization *out);
int32_t tki_properize_finish(struct tki_vocab *vocab, const tki_properization *properization,
                             const uint32_t *pre);
void tki_properization_free(tki_properization *properization);

/* exact_step.c: scratch for testing two tokens (the heap BPE on up to 2t bytes). */
typedef struct tki_exact_scratch {
    tki_heap_workspace heap;
    uint8_t *bytes;
    uint32_t *parts;
} tki_exact_scratch;

int32_t tki_exact_scratch_init(tki_exact_scratch *scratch, const struct tki_vocab *vocab);
void tki_exact_scratch_free(tki_exact_scratch *scratch);
/*
 * theta of a text of text_length bytes whose longest canonical suffix is tau,
 * exact for any vocabulary: theta_end[-k] is theta(text_length - k) for
 * 1 <= k <= min(t, text_length - 1); hint is tried first (the incremental
 * step's answer, or TKI_NONE).  TKI_NONE if no suffix fits (inconsistent
 * tables).
 */
uint32_t tki_exact_theta(const struct tki_vocab *vocab, tki_exact_scratch *scratch, uint32_t tau,
                         uint32_t hint, const uint32_t *theta_end, uint64_t text_length);

/* token_order.c: the mergeable tokens in byte order (a build-time index). */
typedef struct tki_token_order {
    uint32_t count;
    uint32_t *rank;             /* by position: the token there                       */
    uint16_t *common_prefix;    /* by position: bytes shared with the token before it */
} tki_token_order;

int32_t tki_token_order_build(const struct tki_vocab *vocab, tki_token_order *order);
void tki_token_order_free(tki_token_order *order);

/*
 * automaton.c: over the canonical tokens, taken in `order`; *suffix_chain_nodes
 * gets the number of nodes of all their suffix chains (the centroid blocks).
 * TKI_AUTOMATON_TOO_LARGE (nothing built) when it would need TKI_BLOCK_LIMIT
 * blocks or more.
 */
#define TKI_AUTOMATON_TOO_LARGE (-1)
int32_t tki_automaton_build(struct tki_vocab *vocab, const tki_token_order *order,
                            uint64_t *suffix_chain_nodes);
void tki_automaton_free(struct tki_vocab *vocab);

/*
 * The automaton is one table of blocks of 16 words.  A state's block is its
 * row; the tiles the state owns (a copy of its failure target's tile for
 * each high nibble it has trie edges under) follow it, so the tile a step
 * along a trie edge reads is next to the row it read before (the adjacent
 * lines, often the same page).  A state's id is its row's block, a tile's id
 * its block.
 *
 * A row's word h holds, in its low 24 bits, the tile for bytes of high nibble
 * h; the top bytes of words 0..3 hold tau, the longest canonical token that
 * is a suffix of the state's string (TKI_NONE: none), lowest byte first, so
 * the step reads tau from the cache line that the transition on the next byte
 * reads anyway; the top bytes of words 4..5 hold the state's depth (the
 * length of its string, for the stream), word 6's top byte the number of
 * tiles the state owns (so the next state's row is the block after them),
 * and the top bytes of words 7..10 suffix_parent[tau] (TKI_NONE: none), the
 * suffix the step tries when tau is not valid, so that it comes from a line
 * the walk has just read rather than from a table indexed by token; word 11's
 * top byte is 1 when a watched token (properize.c) is a suffix of the state's
 * string (tau is WATCHED_SUFFIX), else 0.
 * An automaton of TKI_BLOCK_LIMIT blocks or more is not built (the
 * vocabulary then uses the heap BPE).
 *
 * block_keys[] says what each block is, in one u16: a row's depth (the
 * root's 0), a tile's TKI_TILE_KEY + its owner's depth, and 0 one past the
 * last block.  The encoders never read it: an image carries it so that its
 * check (image_check.c) finds every block's role without first walking the
 * rows, and checks the keys and the table against each other in one pass.
 */
#define TKI_TILE_KEY 0x8000u
#define TKI_TILE_ID_BITS 24u
#define TKI_TILE_ID_MASK ((1u << TKI_TILE_ID_BITS) - 1u)
#ifndef TKI_BLOCK_LIMIT /* a test build lowers it (tests/c/test_block_limit.c) */
#define TKI_BLOCK_LIMIT ((uint64_t)1 << TKI_TILE_ID_BITS)
#endif

static inline uint32_t tki_automaton_next(const struct tki_vocab *vocab, uint32_t state,
                                          uint8_t byte) {
    /* state * 16 + (byte >> 4), as one shift of state and byte side by side (two
     * instructions fewer a step than splitting the byte first) */
    uint64_t row_word = (((uint64_t)state << 8) | byte) >> 4;
    uint32_t tile = vocab->automaton[row_word] & TKI_TILE_ID_MASK;
    return vocab->automaton[(size_t)tile * TKI_TILE_WIDTH + (byte & 15u)];
}

/*
 * Starts loading the TKI_PREFETCH_BLOCKS blocks after a state's row while
 * the walk loads the row itself: the tiles the state owns and, past them,
 * rows of its subtree (pre-order: its first child's row follows its last
 * tile).  The next step mostly reads one of those tiles, and often moves to
 * one of those rows: stepping the non-token pieces of the corpora with
 * o200k_base, the tile was within the four blocks after the row in 84%
 * (multilingual) and 79% (English) of the steps, the next state's row in 34%
 * and 21%.  Those loads used to start only once the row had arrived (the
 * tile's id is in it) and then the tile (the next row's id is in it).
 * Measured in C, o200k_base, per document: ~10% less time on English and
 * ~14% on multilingual text; streamed: ~9% and ~12%.  The addresses are
 * computed as integers, so a state near the end of the table makes no
 * pointer past it (a prefetch of an address outside the table is a hint
 * that the processor drops).
 */
#define TKI_PREFETCH_BLOCKS 4u

static inline void tki_prefetch_after_row(const struct tki_vocab *vocab, uint32_t state) {
    uintptr_t row = (uintptr_t)(vocab->automaton + (size_t)state * TKI_TILE_WIDTH);
    for (uintptr_t block = 1; block <= TKI_PREFETCH_BLOCKS; block++) {
        TKI_PREFETCH((const void *)(row + block * TKI_TILE_WIDTH * sizeof(uint32_t)));
    }
}

/* The length of a state's string. */
static inline uint32_t tki_state_depth(const struct tki_vocab *vocab, uint32_t state) {
    const uint32_t *row = vocab->automaton + (size_t)state * TKI_TILE_WIDTH;
    return (row[4] >> TKI_TILE_ID_BITS) | ((row[5] >> TKI_TILE_ID_BITS) << 8);
}

/* The row of the state after this one in the table (the states in pre-order): past its tiles. */
static inline uint32_t tki_next_state(const struct tki_vocab *vocab, uint32_t state) {
    return state + 1 + (vocab->automaton[(size_t)state * TKI_TILE_WIDTH + 6] >> TKI_TILE_ID_BITS);
}

/*
 * The top bytes of four words of a row, the first lowest: tau of a state
 * (words 0..3), its longest canonical suffix token, or TKI_NONE.  With
 * SSE2 (every x86-64), the four top bytes come from one 16-byte load, shifted
 * down and packed twice: five instructions for the step's most frequent read,
 * where four loads, three shifts and three ors were eleven (multilingual text
 * per document ~3% faster).  The same value on every machine.
 */
static inline uint32_t tki_row_top_bytes(const uint32_t *row) {
#if defined(TKI_SSE2)
    __m128i words = _mm_loadu_si128((const __m128i *)(const void *)row);
    __m128i bytes = _mm_srli_epi32(words, TKI_TILE_ID_BITS); /* each word's top byte, 0..255 */
    bytes = _mm_packs_epi32(bytes, bytes);                   /* no saturation below 256      */
    bytes = _mm_packus_epi16(bytes, bytes);
    return (uint32_t)_mm_cvtsi128_si32(bytes);
#else
    return (row[0] >> TKI_TILE_ID_BITS) | ((row[1] >> TKI_TILE_ID_BITS) << 8) |
           ((row[2] >> TKI_TILE_ID_BITS) << 16) | ((row[3] >> TKI_TILE_ID_BITS) << 24);
#endif
}

static inline uint32_t tki_state_tau(const struct tki_vocab *vocab, uint32_t state) {
    return tki_row_top_bytes(vocab->automaton + (size_t)state * TKI_TILE_WIDTH);
}

/* suffix_parent[tau] of a state, from words 7..10 of its row. */
static inline uint32_t tki_state_tau_parent(const struct tki_vocab *vocab, uint32_t state) {
    return tki_row_top_bytes(vocab->automaton + (size_t)state * TKI_TILE_WIDTH + 7);
}

/* 1 when a watched token ends the state's string (word 11's top byte), else 0. */
static inline uint32_t tki_state_watched(const struct tki_vocab *vocab, uint32_t state) {
    return vocab->automaton[(size_t)state * TKI_TILE_WIDTH + 11] >> TKI_TILE_ID_BITS;
}

/* centroid.c */
int32_t tki_centroid_build(struct tki_vocab *vocab, uint64_t total_nodes);
void tki_centroid_free(struct tki_vocab *vocab);

/*
 * image.c: an image being read.  Its checksum is taken as the checks read
 * the tables: tki_image_consume adds the bytes of `table` (one of the
 * vocabulary's table pointers) up to `end` to its sum, once, and on a mapped
 * image drops their pages from the process; what is never consumed is
 * summed after the checks.
 */
typedef struct tki_image_reader tki_image_reader;
void tki_image_consume(tki_image_reader *reader, const void *table, const void *end);

/*
 * image_check.c: TKI_OK when every invariant the encoders and decoders rely
 * on holds for a vocabulary whose tables point into an image being read
 * (pool_size: the pool's bytes); TKI_ERR_ARGUMENT when one fails,
 * TKI_ERR_NOMEM.  Consumes the big tables as it reads them.
 */
int32_t tki_image_check(const struct tki_vocab *vocab, uint64_t pool_size,
                        tki_image_reader *reader);

/*
 * image.c: drops the whole pages between `from` and `to` of a read-only file
 * mapping from the process (Linux; they stay in the page cache), and returns
 * where the next release should start (the end of the last page dropped, or
 * `from` when none was).
 */
const void *tki_image_release_pages(const void *from, const void *to);


/*
 * pretokenize.c: the end of the match at pos (pos < len) for a TKI_PATTERN_*,
 * by the full matcher alone; tki_pretokenize_next (pretokenize_ascii.h) tries
 * the ASCII shortcut first.
 */
size_t tki_pretokenize_match(int32_t pattern, const uint8_t *data, size_t len, size_t pos);

/*
 * Whether data[pos..pos + 3) are three ASCII digits.  With cl100k's and
 * o200k's patterns such a piece start is a piece of those three bytes,
 * whatever follows: no alternative before \p{N}{1,3} matches at a digit (their
 * optional prefixes exclude \p{N}, and a digit is no letter or apostrophe),
 * and that one takes three digits and stops.  The pre-tokenizer returns such
 * a piece at once; the encoder cuts long runs of digits into them itself.
 */
static inline int tki_three_ascii_digits(const uint8_t *data, size_t len, size_t pos) {
    return len >= 3 && pos <= len - 3 && (uint8_t)(data[pos] - '0') < 10 &&
           (uint8_t)(data[pos + 1] - '0') < 10 && (uint8_t)(data[pos + 2] - '0') < 10;
}

/* Scans that ran into the end of the text, resumable on a longer one (streaming). */
#define TKI_SCAN_MEMO_SIZE 16u
typedef struct tki_scan_entry {
    uint32_t kind;
    size_t start;
    size_t end;
    size_t aux[3];
} tki_scan_entry;

typedef struct tki_scan_memo {
    uint32_t count;
    tki_scan_entry entries[TKI_SCAN_MEMO_SIZE];
} tki_scan_memo;

/*
 * The same match, also telling whether it depended on the end of the text
 * (*touched_end: more text could change it), with an optional memo.
 */
size_t tki_pretokenize_match_ex(int32_t pattern, const uint8_t *data, size_t len, size_t pos,
                                tki_scan_memo *memo, int memo_writable, int *touched_end);

/*
 * tki_pretokenize_match, also telling whether it depended on the end of the
 * text (*touched_end), for a caller that tried the ASCII shortcut itself and
 * has no scans to resume (the pieces of a stream's text after its first).
 */
size_t tki_pretokenize_match_open(int32_t pattern, const uint8_t *data, size_t len, size_t pos,
                                  int *touched_end);

/*
 * pattern.c: matching with a compiled pattern, for the encoders.  A
 * transition is the next state (TKI_PATTERN_STATE_MASK) and whether a match
 * ends before the character read (TKI_PATTERN_MATCHED).
 */
#define TKI_PATTERN_MATCHED 0x8000u
#define TKI_PATTERN_STATE_MASK 0x7FFFu
#define TKI_PATTERN_MAX_STATES 4096u
#define TKI_PATTERN_MAX_LOOPS 64u /* states that repeat themselves on some character */

/*
 * What a caller keeps between the matches of one text (or of a stream's
 * growing text): the scan of the open piece, so that matching it again on a
 * longer text resumes where it stopped, and per loop state the last run it
 * crossed, so that no run is crossed twice.  Positions are offsets in the
 * text; reset it (tki_pattern_scan_reset) before using it with another text,
 * or after the bytes before a kept position have changed.
 */
typedef struct tki_pattern_scan {
    size_t open_start;    /* the piece start of the open scan (SIZE_MAX: none) */
    size_t open_scanned;  /* the open scan has read data[open_start .. open_scanned) */
    size_t open_last;     /* its best match end so far (open_start: none)     */
    uint32_t open_state;
    uint64_t run_slots;   /* bit s: run_from[s], run_to[s] hold a run (else unset) */
    size_t run_from[TKI_PATTERN_MAX_LOOPS]; /* by loop slot: [from, to) read in that state */
    size_t run_to[TKI_PATTERN_MAX_LOOPS];
} tki_pattern_scan;

void tki_pattern_scan_reset(tki_pattern_scan *scan);

/*
 * The end of the piece that starts at pos (pos < len) in data[0..len).
 * final != 0: the text ends at len for good.  final == 0: more text may
 * follow; the end returned is the one if it did not, and *touched_end (may be
 * NULL) is 1 when more text could change it (the scan reached len, or a
 * character cut by len), 0 when it is final.  Matching the same pos again
 * after the text has grown resumes the scan (O(1) per new byte, amortized).
 * Always > pos for a loaded pattern.
 */
size_t tki_pattern_match(const tki_pattern *pattern, tki_pattern_scan *scan, const uint8_t *data,
                         size_t len, size_t pos, int final, int *touched_end);

/* The built-in pattern that splits this one's text but for its last piece (tki_pattern_use_builtin), or 0. */
int32_t tki_pattern_builtin_body(const tki_pattern *pattern);

/*
 * The ends of the pieces in a row from the piece start pos whose ends do not
 * depend on where the text ends (written to ends[0..), at most `capacity`);
 * returns how many: 0 when the piece at pos may reach len (the caller then
 * asks tki_pattern_match, which resumes the scan this left in `scan`).  The
 * same ends as tki_pattern_match from each of them, for any continuation.
 */
size_t tki_pattern_split(const tki_pattern *pattern, tki_pattern_scan *scan, const uint8_t *data, size_t len,
                         size_t pos, size_t *ends, size_t capacity);

/*
 * A loop over the pieces of one text in order, for the encoders: the ends of
 * tki_pattern_split handed out one at a time, and tki_pattern_match where it
 * has none.  Zero-initialize it; a loop that stops and goes on elsewhere
 * starts a new one.
 */
enum { TKI_PATTERN_CURSOR_PIECES = 64 };
typedef struct tki_pattern_cursor {
    size_t ends[TKI_PATTERN_CURSOR_PIECES];
    uint32_t next, count; /* ends[next .. count) still to hand out */
} tki_pattern_cursor;

/*
 * The end of the piece at `at` (the end this returned before, or the loop's
 * first piece start), as tki_pattern_match(pattern, scan, data, len, at,
 * final, touched_end) gives it; `wanted` (>= 1) bounds the pieces split
 * ahead of the caller's need.
 */
static inline size_t tki_pattern_cursor_next(tki_pattern_cursor *cursor, const tki_pattern *pattern,
                                             tki_pattern_scan *scan, const uint8_t *data, size_t len,
                                             size_t at, int final, int *touched_end, size_t wanted) {
    if (cursor->next < cursor->count) {
        return cursor->ends[cursor->next++];
    }
    const size_t capacity = wanted < TKI_PATTERN_CURSOR_PIECES ? wanted : TKI_PATTERN_CURSOR_PIECES;
    cursor->count = (uint32_t)tki_pattern_split(pattern, scan, data, len, at, cursor->ends, capacity);
    cursor->next = 0;
    if (cursor->count > 0) {
        return cursor->ends[cursor->next++];
    }
    return tki_pattern_match(pattern, scan, data, len, at, final, touched_end);
}

/*
 * After a match that touched the end of the text (final == 0): the furthest
 * end, counted from the start of the text, up to which every continuation
 * keeps the open piece's bytes in it (see compute_holds_text in pattern.c).
 */
size_t tki_pattern_certain_end(const tki_pattern *pattern, const tki_pattern_scan *scan);

/* ------------------------------------------------------------------ steps.c */

typedef struct tki_repeat_finder tki_repeat_finder;

/*
 * One piece stepped as its bytes come (steps.c).  last_token[i - base] is
 * theta(i), the rank of the last token of the BPE of the piece's first i
 * bytes, for base <= i <= length (TKI_NONE at 0); a stream moves base up as
 * its output becomes certain.  The forest ids of the last t + 1 ends are kept
 * in a window of their own.  Where steps were copied (a periodic stretch),
 * theta(m) == theta(m - copied_period) for copied_from <= m <= copied_to.
 */
/*
 * A certain end found by a full walk (tki_stepper_certain_end), kept by the
 * phase of its prefix end in a copied stretch: `end` (0: none), the depth of
 * the automaton state there, the stretch's period and the certain end.
 */
typedef struct tki_certain_phase {
    uint64_t end, certain, period;
    uint32_t depth;
} tki_certain_phase;
enum { TKI_CERTAIN_PHASES = 8 };

typedef struct tki_stepper {
    const struct tki_vocab *vocab;
    uint32_t flags;             /* TKI_METHOD_LINEAR or 0                          */
    uint32_t state;             /* the automaton state after `length` bytes        */
    uint64_t length;            /* bytes stepped                                   */
    uint64_t base;              /* the first prefix end kept                       */
    uint32_t *last_token;
    size_t capacity;            /* entries of last_token                           */
    uint32_t *forest;           /* forest[j - forest_base] = last(j), j <= length  */
    uint64_t forest_base;
    size_t forest_capacity;
    uint8_t *marks;             /* scratch of tki_stepper_certain_end, all 0       */
    size_t marks_capacity;
    tki_repeat_finder *finder;  /* NULL until a piece is long enough for repeats   */
    int finder_ready;           /* the finder was reset for this piece             */
    uint64_t copied_from, copied_to, copied_period; /* period 0: none              */
    uint64_t copying_period;    /* a copy the end of the bytes stopped (0: none):  */
                                /*   the next call goes on with it                 */
    int forest_stale;           /* that copy left the forest window unfilled: it   */
                                /*   is refilled before a step needs it            */
    int watched;                /* a watched token ended in the piece: exact steps */
    tki_exact_scratch *exact;   /* NULL until a piece is watched                   */
    tki_certain_phase certain_phases[TKI_CERTAIN_PHASES]; /* by (end mod period)   */
} tki_stepper;

void tki_stepper_init(tki_stepper *stepper, const struct tki_vocab *vocab, uint32_t flags);
void tki_stepper_free(tki_stepper *stepper);
/* Starts a new piece (keeps the memory). */
void tki_stepper_reset(tki_stepper *stepper);
/* Room for prefix ends up to `through`; TKI_ERR_NOMEM leaves the stepper as it was. */
int32_t tki_stepper_reserve(tki_stepper *stepper, uint64_t through);
/*
 * Steps the piece's bytes length..end - 1.  bytes[i - bytes_from] is byte i,
 * for bytes_from <= i < end, and bytes_from <= base (a copy compares bytes of
 * earlier periods).  On an error the stepper must not be used again.
 */
int32_t tki_stepper_run(tki_stepper *stepper, const uint8_t *bytes, uint64_t bytes_from,
                        uint64_t end);
/*
 * The tokens of the BPE of the first `end` bytes from prefix end `stop` on
 * (stop must be on that BPE's path: a certain end, or 0), in order, to out;
 * their number, or SIZE_MAX when the path skips `stop`.
 */
size_t tki_stepper_read_back(const tki_stepper *stepper, uint64_t end, uint64_t stop, uint32_t *out);
/* The same over a plain array: last_token[i - base] is theta(i). */
size_t tki_read_back(const struct tki_vocab *vocab, const uint32_t *last_token, uint64_t base,
                     uint64_t end, uint64_t stop, uint64_t copied_from, uint64_t copied_to,
                     uint64_t copied_period, uint32_t *out);
/*
 * The furthest prefix end up to which the tokens are the same for every
 * continuation of the piece (>= emitted, itself such an end); O(length - it).
 */
int32_t tki_stepper_certain_end(tki_stepper *stepper, uint64_t emitted, uint64_t *out_end);
/* Drops the prefix ends below keep_from (a stream keeps min(emitted, length - t) on). */
void tki_stepper_forget_before(tki_stepper *stepper, uint64_t keep_from);

/* Short pieces stepped side by side (steps.c): each lane's arrays have len + 1 entries. */
enum { TKI_STEP_LANES = 16 };
typedef struct tki_step_lane {
    const uint8_t *piece;
    size_t len;
    uint32_t *last_forest_id;
    uint32_t *last_token;
    uint32_t tag;               /* the caller's own (tki_step_lanes leaves the lanes in place) */
} tki_step_lane;

int32_t tki_step_lanes(const struct tki_vocab *vocab, tki_step_lane *lanes, size_t lane_count,
                       uint32_t flags);

/* ------------------------------------------------------------------ encode.c */

/*
 * The engine's scratch for one call or one stream: the stepper of long
 * pieces, the heap BPE's workspace, the lane pool of long texts.
 */
/* The engine's pattern for a compiled custom pattern (tki_engine.compiled). */
#define TKI_PATTERN_COMPILED 4

typedef struct tki_engine {
    const struct tki_vocab *vocab;
    int32_t pattern;            /* TKI_PATTERN_*, TKI_PATTERN_COMPILED, or 0: a
                                   stretch is one piece                            */
    const tki_pattern *compiled;/* TKI_PATTERN_COMPILED: the pattern               */
    tki_pattern_scan *scan;     /*   and its scans of the text (the caller's)      */
    uint32_t flags;             /* TKI_METHOD_LINEAR, TKI_METHOD_HEAP             */
    int use_heap;               /* every piece by the heap BPE                    */
    int long_piece_made;        /* long_piece is initialized (on first use)        */
    tki_stepper long_piece;
    tki_heap_workspace heap;    /* capacity 0: not made yet                       */
    uint32_t *lane_pool;        /* NULL until a long text needs it                */
} tki_engine;

/* A piece's rank is not known yet: tki_engine_encode_piece looks it up. */
#define TKI_UNKNOWN_RANK (TKI_NONE - 1)

void tki_engine_init(tki_engine *engine, const struct tki_vocab *vocab, int32_t pattern,
                     uint32_t flags);
/* Makes the engine split with a compiled pattern; `scan` (reset) lives as long as it. */
void tki_engine_use_compiled(tki_engine *engine, const tki_pattern *compiled, tki_pattern_scan *scan);
void tki_engine_free(tki_engine *engine);
/* TKI_ERR_INTERNAL when the vocabulary lacks a table the engine's method needs. */
int32_t tki_engine_check(const tki_engine *engine);
/*
 * The engine writes ranks (the caller makes them ids: tki_ranks_to_ids).
 * Appends the ranks of one whole piece to out (*count grows): the piece's own
 * rank when it is a token (shortcut_rank: that rank, TKI_NONE for no token,
 * or TKI_UNKNOWN_RANK to look it up), else its BPE.
 */
int32_t tki_engine_encode_piece(tki_engine *engine, const uint8_t *piece, size_t len,
                                uint32_t shortcut_rank, uint32_t *out, size_t *count);
/*
 * Encodes the pieces of data[0..len) that are final: with `final` (the text
 * ends there for good) all of them; else those whose match did not depend on
 * the end of the text.  Appends their ranks to out (*count grows; room for
 * len more suffices), sets *stop to where the first piece that is not final
 * starts (len with final; 0 with pattern 0 and not final), and
 * *last_piece_tokens to the number of ranks of the last piece encoded (left
 * as it was if none).  memo: the resumable scans of a stream's open piece (at
 * 0), or NULL.  On an error the ranks written are not meaningful.
 */
int32_t tki_engine_encode(tki_engine *engine, const uint8_t *data, size_t len, int final,
                          tki_scan_memo *memo, uint32_t *out, size_t *count, size_t *stop,
                          size_t *last_piece_tokens);

/* special_tokens.c: tki_encode_with_specials on an engine the caller set up (it writes ids). */
int32_t tki_engine_encode_with_specials(tki_engine *engine, const tki_special_matcher *specials,
                                        const uint8_t *data, size_t data_len, uint32_t *out,
                                        size_t out_capacity, size_t *out_count,
                                        size_t *out_last_piece_tokens);

/* pretokenize.c: the memo for a text that now starts `shift` bytes later. */
void tki_scan_memo_shift(tki_scan_memo *memo, size_t shift);

#endif /* TIKTOKEN_INC_INTERNAL_H */
