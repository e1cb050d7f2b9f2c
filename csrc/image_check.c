/*
 * image_check.c — every table of a vocabulary read from an image, checked
 * before anything encodes or decodes with it.
 *
 * The image's checksum (image.c) finds damage, not tampering: it is not
 * keyed, so whoever can write a cache file can make it match.  The encoders
 * read the tables without checks of their own (they are the hot loops), so
 * an image is used only once every invariant those loops rely on for memory
 * safety and for termination holds; any that fails refuses the image
 * (TKI_ERR_ARGUMENT) and the caller rebuilds it.  What no check can tell is
 * whether the tables are the ones the caller's rank file builds: a
 * consistent image of another vocabulary passes, and gives other ids, never
 * a crash or a hang.  Keeping others from writing the cache is the caller's
 * part (tiktoken_inc/_cache.py uses only a directory of the user's own).
 *
 * The invariants, each with the loops that rely on it (t is max_token_bytes,
 * m the bytes of the piece so far):
 *
 *  Token table (tki_decode, tki_decoded_length, tki_token_bytes, the hash's
 *  long-key compare):
 *   T1  every kind is ABSENT or MERGEABLE (an image holds no special
 *       tokens); an absent rank has length 0 and offset 0.
 *   T2  offset + length <= pool size, for every rank (decoding copies it).
 *   T3  a mergeable token has 1..t bytes, t is the longest (at most
 *       TKI_MAX_TOKEN_BYTES when incremental: rules hold 16-bit lengths), and
 *       the counts of each kind are the header's.
 *  Ids (tki_rank_of_id, tki_id_of_rank; internal.h):
 *   I1  the last rank is a token (its id is the largest); with sparse ids,
 *       every rank is one, and token_id ascends strictly below TKI_NONE, so
 *       the binary search from an id to its rank finds the only match.
 *  Hash (tki_hash_probe, tki_hash_slot_holds, on every piece):
 *   H1  at least one empty slot (all zero): the probe loop stops at one.
 *   H2  a full slot holds a mergeable rank, and its middle word's length
 *       byte is min(length, 255) of that token: a key matched in the slot
 *       alone then has the token's length (or is 255 bytes or longer, and
 *       compared with the token's length first), so the compare of a key
 *       longer than 11 bytes reads inside the token.  As many full slots as
 *       tokens.
 *  Rules (locally_valid, tki_step_theta, read_back, the stream's ends):
 *   R1  canonical tokens are mergeable; IMPROPER, WATCHED and WATCHED_SUFFIX
 *       only on canonical tokens, the last two only in an incremental
 *       vocabulary, and WATCHED_SUFFIX exactly where the token or its suffix
 *       parent has it (properize.c); the header's counts (non-canonical,
 *       improper, watched, the longest non-canonical token, which bounds what
 *       the stream holds).
 *   R2  a canonical token's rule.length is its length (>= 1: read_back and
 *       kill_end step back by it) and suc_length < length (locally_valid
 *       reads last(m - suc_length), inside the t + 1 ends a window keeps).
 *  Automaton (tki_automaton_next on every byte; the row's tau, parent, depth):
 *   A1  the rows are where the walk by tki_next_state finds them: block 0 a
 *       row owning 16 tiles, every other row at most 16, the last ending at
 *       automaton_blocks (< 2^24, the width of a tile id), state_count rows.
 *   A2  a row's 16 tile ids name tiles (blocks that are no row); a tile's 16
 *       words name rows other than the root, so after a byte the state is
 *       never the root (whose tau is TKI_NONE).
 *   A3  depths: the root 0, every other row 1..t; a tile's states are at
 *       most one deeper than its owner (the row before it), and a row uses
 *       only tiles whose owner is no deeper than itself.  So a transition
 *       goes at most one deeper, and after m bytes of a piece the depth is at
 *       most m: the stream's window start (length - depth) never moves back
 *       nor below the ends it keeps.
 *   A4  the root's tau is TKI_NONE; every other row's tau is a canonical
 *       token no longer than the row's depth (so theta, tau or a shorter
 *       token, never reaches before the piece: read_back's `end -= length`
 *       stays >= 0), and its parent (words 7..10, the suffix the step tries
 *       first) is TKI_NONE or a canonical token shorter than tau; word 11's
 *       top byte is 1 exactly where tau is WATCHED_SUFFIX, else 0 (1: the
 *       exact step, which reads what the incremental one reads and tokens'
 *       bytes; a 0 that should be 1 would give wrong ids silently; the
 *       root's 0, and every row's 0 without watched tokens); the unused top
 *       bytes (words 12..15) are 0.
 *  Suffix chains (linear_scan; the step's parent test):
 *   S1  suffix_parent of a canonical token is TKI_NONE or a strictly
 *       shorter canonical token (the scan ends within t steps); of any other
 *       rank, TKI_NONE.
 *  Centroid blocks (centroid_search's for(;;)):
 *   C1  the blocks lie end to end in the order of their tokens' own states
 *       (the state whose depth is tau's length), from node 0 to
 *       decomposition_nodes, one per canonical token (decomposition_start),
 *       each of 1..t nodes; other ranks have TKI_NONE.
 *   C2  a node's token is canonical and no longer than the block's (the
 *       search reads last(m - |u|)); its entries lie after it and inside the
 *       block: i < first_entry and first_entry + entries <= the block's
 *       nodes, so each move goes strictly forward and a search ends within
 *       the block's nodes moves.
 *  The header's sizes are bounded by the payload before anything is
 *  multiplied (image.c), so no size wraps around.
 *
 * Cost (o200k_base): a pass over the per-rank tables, one over the hash and
 * two over the automaton (the first finds the rows; the second checks rows,
 * tiles and centroid blocks, in the order they lie), with scratch of a few
 * bytes per block and per rank.  The passes over the big tables take their
 * checksum as they go (tki_image_consume), so each is read once more, not
 * twice.  The checks of A2 and A3, a lookup for each of the 12 million words
 * of the rows and tiles, are most of the time.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define REFUSE TKI_ERR_ARGUMENT
#define CONSUME_BYTES ((ptrdiff_t)1 << 20) /* a pass over a big table consumes it this often */

typedef struct check_state {
    const struct tki_vocab *vocab;
    uint64_t pool_size;
    tki_image_reader *reader;
    uint64_t canonical_count;
    uint16_t *canonical_length; /* by rank: a canonical token's length, else 0; and 0   */
                                /*   once more, for any id past the ranks               */
} check_state;

/* The checksum of `table` up to `end` (image.c). */
static void consume(const check_state *check, const void *table, const void *end) {
    tki_image_consume(check->reader, table, end);
}

/* A rank, or rank_limit for any id past the ranks (whose canonical_length is 0). */
static inline uint32_t clamped_rank(const check_state *check, uint32_t rank) {
    uint32_t rank_limit = check->vocab->rank_limit;
    return rank < rank_limit ? rank : rank_limit;
}

/* Whether `token` is a canonical token of 1..length bytes (after check_ranks). */
static inline int canonical_within(const check_state *check, uint32_t token, uint32_t length) {
    return (uint32_t)check->canonical_length[clamped_rank(check, token)] - 1u < length;
}

/* T1-T3, R1, R2, S1 and C1's TKI_NONE, in one pass over the per-rank tables. */
static int32_t check_ranks(check_state *check) {
    const struct tki_vocab *vocab = check->vocab;
    uint32_t mergeable = 0, noncanonical = 0, improper = 0, watched = 0;
    uint32_t longest = 0, longest_noncanonical = 0;
    const uint8_t known = TKI_FLAG_CANONICAL | TKI_FLAG_IMPROPER |
                          (vocab->incremental ? TKI_FLAG_WATCHED | TKI_FLAG_WATCHED_SUFFIX : 0);
    for (uint32_t rank = 0; rank < vocab->rank_limit; rank++) {
        uint8_t kind = vocab->token_kind[rank];
        uint8_t flags = vocab->rule_flags[rank];
        uint32_t length = vocab->token_length[rank];
        uint64_t offset = vocab->token_offset[rank];
        if (offset > check->pool_size || length > check->pool_size - offset) {
            return REFUSE;
        }
        if (kind == TKI_KIND_ABSENT) {
            if (flags != 0 || length != 0 || offset != 0) {
                return REFUSE;
            }
        } else if (kind == TKI_KIND_MERGEABLE) {
            if (length == 0 || length > vocab->max_token_bytes || (flags & ~known) != 0 ||
                (flags != 0 && !(flags & TKI_FLAG_CANONICAL))) {
                return REFUSE;
            }
            mergeable++;
            longest = length > longest ? length : longest;
            if (!(flags & TKI_FLAG_CANONICAL)) {
                noncanonical++;
                longest_noncanonical = length > longest_noncanonical ? length : longest_noncanonical;
            }
            improper += (flags & TKI_FLAG_IMPROPER) != 0;
            watched += (flags & TKI_FLAG_WATCHED) != 0;
        } else {
            return REFUSE;
        }
        if (!vocab->incremental) {
            continue; /* the heap BPE reads the token table and the hash alone */
        }
        uint32_t parent = vocab->suffix_parent[rank];
        uint32_t start = vocab->decomposition_start[rank];
        if (flags & TKI_FLAG_CANONICAL) {
            const tki_token_rule *rule = &vocab->rule[rank];
            if (rule->length != length || rule->suc_length >= length ||
                (parent != TKI_NONE &&
                 (parent >= vocab->rank_limit ||
                  !(vocab->rule_flags[parent] & TKI_FLAG_CANONICAL) ||
                  vocab->token_length[parent] >= length))) {
                return REFUSE;
            }
            int suffix_watched = (flags & TKI_FLAG_WATCHED) ||
                                 (parent != TKI_NONE && (vocab->rule_flags[parent] & TKI_FLAG_WATCHED_SUFFIX));
            if (suffix_watched != ((flags & TKI_FLAG_WATCHED_SUFFIX) != 0)) {
                return REFUSE;
            }
            check->canonical_length[rank] = (uint16_t)length;
            check->canonical_count++;
        } else if (parent != TKI_NONE || start != TKI_NONE) {
            return REFUSE;
        }
    }
    /* Every rank is checked now: a canonical flag implies a mergeable token. */
    if (mergeable != vocab->token_count || longest != vocab->max_token_bytes || noncanonical != vocab->noncanonical_count ||
        longest_noncanonical != vocab->longest_noncanonical || improper != vocab->improper_count ||
        watched != vocab->watched_count) {
        return REFUSE;
    }
    return TKI_OK;
}

/* I1 (after check_ranks: it has counted the mergeable tokens). */
static int32_t check_ids(const check_state *check) {
    const struct tki_vocab *vocab = check->vocab;
    uint32_t ranks = vocab->rank_limit;
    if (vocab->token_kind[ranks - 1] != TKI_KIND_MERGEABLE) {
        return REFUSE;
    }
    if (!vocab->sparse_ids) {
        return TKI_OK;
    }
    const uint32_t *token_id = vocab->token_id;
    if (vocab->token_count != ranks || token_id[ranks - 1] == TKI_NONE) {
        return REFUSE;
    }
    uint32_t wrong = 0;
    for (uint32_t rank = 1; rank < ranks; rank++) {
        wrong |= token_id[rank] <= token_id[rank - 1];
    }
    consume(check, token_id, token_id + ranks);
    return wrong ? REFUSE : TKI_OK;
}

/* H1 and H2, in one pass over the slots. */
static int32_t check_hash(check_state *check) {
    const struct tki_vocab *vocab = check->vocab;
    uint64_t capacity = vocab->hash_mask + 1;
    const tki_hash_slot *slots = vocab->hash_slots;
    const tki_hash_slot *consumed = slots;
    uint64_t full = 0;
    uint32_t wrong = 0;
    for (uint64_t slot = 0; slot < capacity; slot++) {
        const tki_hash_slot *entry = &slots[slot];
        uint32_t rank = entry->rank;
        if (rank == TKI_NONE) {
            wrong |= entry->head != 0 || entry->middle != 0;
        } else if (rank >= vocab->rank_limit) {
            return REFUSE;
        } else {
            uint32_t length = vocab->token_length[rank];
            wrong |= vocab->token_kind[rank] != TKI_KIND_MERGEABLE ||
                     (entry->middle & 0xffu) != (length < 255 ? length : 255);
            full++;
        }
        if ((const uint8_t *)entry - (const uint8_t *)consumed >= CONSUME_BYTES) {
            consume(check, slots, entry);
            consumed = entry;
        }
    }
    consume(check, slots, slots + capacity);
    return !wrong && full < capacity && full == vocab->token_count ? TKI_OK : REFUSE;
}

/*
 * The checks of A2 and A3 read the block keys (internal.h) of the blocks a
 * row or tile names: a lookup for each of the 12 million words of
 * o200k_base's rows and tiles.  With keys as defined, each is one unsigned
 * compare in 16 bits: a tile word w is a non-root row at most one deeper
 * than the tile's owner (depth d) exactly when key(w) - 1 <= d; a row's tile
 * id x names a tile whose owner is no deeper than the row (depth d) exactly
 * when key(x) - TKI_TILE_KEY <= d (every other key wraps around: depths are
 * at most 4096).  An id past the table reads the key one past the last
 * block, 0, which fails both.
 *
 * The keys are the image's own: they are checked against the table in the
 * same pass that uses them (every block's key, where the walk finds the
 * block), so any wrong key refuses the image before the pass ends, and a
 * pass that ends used only right keys.
 */

/* The key of block id x (clamped: an id past the table reads keys[blocks], 0). */
static inline uint32_t key_of(const uint16_t *keys, uint32_t blocks, uint32_t x) {
    return keys[x < blocks ? x : blocks];
}

/*
 * Whether, for some one of the 16 ids at ids[0..16) (masked to 24 bits),
 * (uint16_t)(key - bias) > limit.  With SSE2 the keys are gathered eight at
 * a time into a vector and compared at once.  The same answer either way.
 */
static inline uint32_t some_key_above(const uint16_t *keys, uint32_t blocks, const uint32_t *ids,
                                      uint16_t bias, uint16_t limit) {
#if defined(TKI_SSE2)
    __m128i worst = _mm_setzero_si128();
    for (int half = 0; half < 2; half++) {
        const uint32_t *at = ids + 8 * half;
        __m128i gathered = _mm_setzero_si128();
        gathered = _mm_insert_epi16(gathered, key_of(keys, blocks, at[0] & TKI_TILE_ID_MASK), 0);
        gathered = _mm_insert_epi16(gathered, key_of(keys, blocks, at[1] & TKI_TILE_ID_MASK), 1);
        gathered = _mm_insert_epi16(gathered, key_of(keys, blocks, at[2] & TKI_TILE_ID_MASK), 2);
        gathered = _mm_insert_epi16(gathered, key_of(keys, blocks, at[3] & TKI_TILE_ID_MASK), 3);
        gathered = _mm_insert_epi16(gathered, key_of(keys, blocks, at[4] & TKI_TILE_ID_MASK), 4);
        gathered = _mm_insert_epi16(gathered, key_of(keys, blocks, at[5] & TKI_TILE_ID_MASK), 5);
        gathered = _mm_insert_epi16(gathered, key_of(keys, blocks, at[6] & TKI_TILE_ID_MASK), 6);
        gathered = _mm_insert_epi16(gathered, key_of(keys, blocks, at[7] & TKI_TILE_ID_MASK), 7);
        __m128i shifted = _mm_sub_epi16(gathered, _mm_set1_epi16((short)bias));
        /* Unsigned 16-bit "above limit": what survives a saturating subtraction of it. */
        worst = _mm_or_si128(worst, _mm_subs_epu16(shifted, _mm_set1_epi16((short)limit)));
    }
    return _mm_movemask_epi8(_mm_cmpeq_epi16(worst, _mm_setzero_si128())) != 0xffff;
#else
    uint32_t worst = 0;
    for (uint32_t i = 0; i < TKI_TILE_WIDTH; i++) {
        uint32_t shifted = (uint16_t)(key_of(keys, blocks, ids[i] & TKI_TILE_ID_MASK) - bias);
        worst = shifted > worst ? shifted : worst;
    }
    return worst > limit;
#endif
}

/* C2 for the block of `nodes` nodes at node `at`, of a canonical token of `length` bytes. */
static int32_t check_block(const check_state *check, uint64_t at, uint64_t nodes,
                           uint32_t length) {
    if (nodes == 0 || nodes > check->vocab->max_token_bytes) {
        return REFUSE;
    }
    const tki_decomposition_node *block = check->vocab->decomposition + at;
    uint32_t wrong = 0;
    for (uint32_t i = 0; i < nodes; i++) {
        const tki_decomposition_node *node = &block[i];
        uint32_t first = node->first_entry;
        uint32_t entries = TKI_ENTRY_COUNT(node) + (TKI_HAS_UP(node) ? 1u : 0u);
        wrong |= !canonical_within(check, node->token, length) | (first <= i) |
                 (first > nodes) | (entries > nodes - first);
    }
    return wrong ? REFUSE : TKI_OK;
}

static uint32_t row_owned_tiles(const uint32_t *row) {
    return row[6] >> TKI_TILE_ID_BITS;
}

/*
 * A1-A4, the block keys, and C1 and C2 in the order the blocks lie (a block
 * is checked when the next one's start, or the table's end, says where it
 * ends): one pass over the table, each row and then its tiles.
 */
static int32_t check_automaton(check_state *check) {
    const struct tki_vocab *vocab = check->vocab;
    const uint32_t *automaton = vocab->automaton;
    const uint16_t *keys = vocab->block_keys;
    uint32_t blocks = vocab->automaton_blocks, rows = 0;
    uint64_t blocks_of_tokens = 0;
    const uint32_t *consumed = automaton;
    /* The block before the one found last: where it starts, its token's length. */
    uint64_t pending_start = 0;
    uint32_t pending_length = 0;
    /*
     * A state's tau is a random rank, and a node's token too: what the checks
     * read of them is loaded early, from a second walk FACTS_AHEAD rows ahead
     * (whose lines are themselves loaded LINES_AHEAD blocks ahead) and
     * NODES_AHEAD nodes ahead.
     */
    enum { FACTS_AHEAD = 16, LINES_AHEAD = 96, NODES_AHEAD = 64 };
    uint32_t ahead = 0, ahead_rows = 0, lines_loaded = 0;
    uint64_t nodes_prefetched = 0;
    if (keys[blocks] != 0) {
        return REFUSE;
    }
    for (uint32_t block = 0; block < blocks;) {
        const uint32_t *row = automaton + (size_t)block * TKI_TILE_WIDTH;
        uint32_t owned = row_owned_tiles(row);
        uint32_t depth = tki_state_depth(vocab, block);
        /* A1, A3's depths, and the keys of the row and its tiles. */
        int root = block == 0;
        if ((root ? owned != TKI_TILE_WIDTH || depth != 0
                  : owned > TKI_TILE_WIDTH || depth == 0 || depth > vocab->max_token_bytes) ||
            owned >= blocks - block || keys[block] != depth) {
            return REFUSE;
        }
        uint32_t wrong = 0;
        for (uint32_t tile = block + 1; tile <= block + owned; tile++) {
            wrong |= keys[tile] != TKI_TILE_KEY + depth;
        }
        for (; lines_loaded < block + LINES_AHEAD && lines_loaded < blocks; lines_loaded++) {
            TKI_PREFETCH(automaton + (size_t)lines_loaded * TKI_TILE_WIDTH);
        }
        /* (The walk ahead reads rows not checked yet: it only stays inside the table.) */
        for (; ahead < blocks && ahead_rows < rows + FACTS_AHEAD; ahead_rows++) {
            uint32_t later = clamped_rank(check, tki_state_tau(vocab, ahead));
            TKI_PREFETCH(&check->canonical_length[later]);
            if (later < vocab->rank_limit) {
                TKI_PREFETCH(&vocab->decomposition_start[later]);
            }
            ahead = tki_next_state(vocab, ahead);
        }
        /* A2, A3: the row's tile ids, then the words of the tiles it owns. */
        wrong |= some_key_above(keys, blocks, row, TKI_TILE_KEY, (uint16_t)depth);
        wrong |= (row[12] | row[13] | row[14] | row[15]) >> TKI_TILE_ID_BITS;
        uint32_t watched_row = row[11] >> TKI_TILE_ID_BITS;
        wrong |= watched_row > (root || vocab->watched_count == 0 ? 0u : 1u);
        const uint32_t *tile = row + TKI_TILE_WIDTH;
        const uint32_t *tiles_end = tile + owned * TKI_TILE_WIDTH;
        uint32_t high = 0; /* the top bytes of the tiles' words, ORed */
        for (; tile < tiles_end; tile += TKI_TILE_WIDTH) {
            wrong |= some_key_above(keys, blocks, tile, 1, (uint16_t)depth);
            for (uint32_t i = 0; i < TKI_TILE_WIDTH; i++) {
                high |= tile[i];
            }
        }
        wrong |= high >> TKI_TILE_ID_BITS;
        if (wrong) {
            return REFUSE;
        }
        /* A4, and the blocks. */
        uint32_t tau = tki_state_tau(vocab, block);
        uint32_t parent = tki_state_tau_parent(vocab, block);
        uint32_t length = check->canonical_length[clamped_rank(check, tau)];
        if (root) {
            if (tau != TKI_NONE || parent != TKI_NONE) {
                return REFUSE;
            }
        } else if (length - 1u >= depth ||
                   (parent != TKI_NONE && !canonical_within(check, parent, length - 1))) {
            return REFUSE; /* not canonical, longer than the depth; a parent no shorter */
        } else if (vocab->watched_count > 0 &&
                   watched_row != ((vocab->rule_flags[tau] & TKI_FLAG_WATCHED_SUFFIX) != 0)) {
            return REFUSE; /* (tau is canonical here, so a rank) */
        } else if (length == depth) {
            /* The state of tau itself: the block before tau's ends where tau's starts. */
            uint64_t start = vocab->decomposition_start[tau];
            int placed = blocks_of_tokens == 0 ? start == 0 : start > pending_start;
            if (!placed || start >= vocab->decomposition_nodes ||
                (blocks_of_tokens > 0 && check_block(check, pending_start, start - pending_start,
                                                     pending_length) != TKI_OK)) {
                return REFUSE; /* C1, C2 */
            }
            pending_start = start;
            pending_length = length;
            blocks_of_tokens++;
            for (uint64_t until = start + NODES_AHEAD;
                 nodes_prefetched < until && nodes_prefetched < vocab->decomposition_nodes;
                 nodes_prefetched++) {
                TKI_PREFETCH(&check->canonical_length[clamped_rank(
                    check, vocab->decomposition[nodes_prefetched].token)]);
            }
        }
        rows++;
        block += 1 + owned;
        if ((const uint8_t *)row - (const uint8_t *)consumed >= CONSUME_BYTES) {
            consume(check, automaton, row);
            consume(check, keys, keys + block);
            consume(check, vocab->decomposition, vocab->decomposition + pending_start);
            consumed = row;
        }
    }
    /* The last block ends at the table's end; each token's block is checked once (the
     * starts only grow), so the count says every canonical token has one. */
    if (rows != vocab->state_count || blocks_of_tokens != check->canonical_count ||
        blocks_of_tokens == 0 || pending_start >= vocab->decomposition_nodes ||
        check_block(check, pending_start, vocab->decomposition_nodes - pending_start,
                    pending_length) != TKI_OK) {
        return REFUSE;
    }
    consume(check, automaton, automaton + (size_t)blocks * TKI_TILE_WIDTH);
    consume(check, keys, keys + blocks + 1);
    consume(check, vocab->decomposition_start, vocab->decomposition_start + vocab->rank_limit);
    consume(check, vocab->decomposition, vocab->decomposition + vocab->decomposition_nodes);
    return TKI_OK;
}

int32_t tki_image_check(const struct tki_vocab *vocab, uint64_t pool_size,
                        tki_image_reader *reader) {
    check_state check;
    memset(&check, 0, sizeof(check));
    check.vocab = vocab;
    check.pool_size = pool_size;
    check.reader = reader;
    if (vocab->max_token_bytes == 0 ||
        (vocab->incremental && vocab->max_token_bytes > TKI_MAX_TOKEN_BYTES)) {
        return REFUSE;
    }
    int32_t status = TKI_ERR_NOMEM;
    if (vocab->incremental) {
        check.canonical_length = calloc((size_t)vocab->rank_limit + 1, sizeof(uint16_t));
        if (check.canonical_length == NULL) {
            goto cleanup;
        }
    }
    status = check_ranks(&check);
    if (status == TKI_OK) {
        status = check_ids(&check);
    }
    if (status == TKI_OK) {
        status = check_hash(&check);
    }
    if (status == TKI_OK) {
        /* The per-rank tables are read: their checksum now, and their pages go (on a mapping). */
        uint64_t ranks = vocab->rank_limit;
        consume(&check, vocab->token_offset, vocab->token_offset + ranks);
        consume(&check, vocab->token_length, vocab->token_length + ranks);
        consume(&check, vocab->token_kind, vocab->token_kind + ranks);
        consume(&check, vocab->rule_flags, vocab->rule_flags + ranks);
        consume(&check, vocab->rule, vocab->rule + ranks);
        if (vocab->incremental) {
            consume(&check, vocab->suffix_parent, vocab->suffix_parent + ranks);
        }
    }
    if (status == TKI_OK && vocab->incremental) {
        status = check_automaton(&check);
    }
cleanup:
    free(check.canonical_length);
    return status;
}
