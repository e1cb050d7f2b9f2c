/*
 * automaton.c — the Aho-Corasick automaton over the canonical tokens.
 *
 * After each byte the state is the longest suffix of the text that is a
 * prefix of some canonical token, and tau(state) is the longest canonical
 * token that is a suffix of the text.  Transitions are O(1) worst case, never
 * a failure-link loop: a byte is split into its high and low nibble; a state's
 * row holds 16 tile ids (and tau and its depth, in their top bytes:
 * internal.h), a tile holds 16 next states.  A state starts from its failure
 * target's tiles and owns a copy only of the tiles where it has trie edges of
 * its own, so tiles are shared.
 *
 * Also derived here: suffix_parent[z], the longest proper canonical suffix of
 * each canonical token (tau of its state's failure target), and the length of
 * the longest suffix chain, which sizes the centroid decompositions.
 *
 * Build: the canonical tokens are taken in byte order (token_order.c), where
 * a token adds trie states only past its common prefix with the canonical
 * token before it.  Indexing the states of each depth in that order indexes
 * them breadth-first (by depth, then bytewise), with the children of a state
 * contiguous and in byte order; states are then completed in that order, so
 * a failure target (always shallower) is complete before it is used.
 *
 * The table is laid out in another order: the order in which the tokens make
 * the states, which is the trie's pre-order (a state, then its subtrees in
 * byte order), each state's row followed by the tiles it owns.  A walk down
 * the trie then mostly moves to nearby rows (to the next one, for a first
 * child) instead of a row in the next depth's block, and a step along a trie
 * edge reads a tile next to the row it read (rows and tiles in two tables
 * were ~2-5% slower per document on real text).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void tki_automaton_free(struct tki_vocab *vocab) {
    free(vocab->automaton);
    free(vocab->block_keys);
    free(vocab->suffix_parent);
    vocab->automaton = NULL;
    vocab->block_keys = NULL;
    vocab->suffix_parent = NULL;
}

/* block_keys[] (internal.h) of a complete table: a walk over its rows. */
static int32_t build_block_keys(struct tki_vocab *vocab) {
    uint32_t blocks = vocab->automaton_blocks;
    uint16_t *keys = malloc(((size_t)blocks + 1) * sizeof(uint16_t));
    if (keys == NULL) {
        return TKI_ERR_NOMEM;
    }
    for (uint32_t state = 0; state < blocks; state = tki_next_state(vocab, state)) {
        uint32_t depth = tki_state_depth(vocab, state);
        uint32_t owned = vocab->automaton[(size_t)state * TKI_TILE_WIDTH + 6] >> TKI_TILE_ID_BITS;
        keys[state] = (uint16_t)depth;
        for (uint32_t tile = state + 1; tile <= state + owned; tile++) {
            keys[tile] = (uint16_t)(TKI_TILE_KEY + depth);
        }
    }
    keys[blocks] = 0;
    vocab->block_keys = keys;
    return TKI_OK;
}

/* The trie, by breadth-first index: where each state's children are, by what byte, its id. */
typedef struct trie_shape {
    uint32_t *first_child;   /* its first child (children are contiguous)           */
    uint16_t *child_count;
    uint8_t *edge_byte;      /* the byte from its parent                            */
    uint32_t *state_id;      /* the state's id in the tables (pre-order; root 0)    */
} trie_shape;

/*
 * Indexes the trie states of the canonical tokens (breadth-first, bytewise),
 * numbers them (pre-order) and fills `shape`, *longest_token and *depth
 * (allocated here, by id: the token ending there, or TKI_NONE; the length of
 * the state's string).  Returns the number of states in *state_count.
 */
static int32_t build_trie(struct tki_vocab *vocab, const tki_token_order *order, trie_shape *shape,
                          uint32_t **out_longest_token, uint16_t **out_depth,
                          uint32_t *state_count) {
    int32_t status = TKI_ERR_NOMEM;
    uint32_t max_depth = vocab->max_token_bytes;
    uint32_t *level_start = calloc((size_t)max_depth + 2, sizeof(uint32_t));
    uint32_t *path = malloc(((size_t)max_depth + 1) * sizeof(uint32_t));
    if (level_start == NULL || path == NULL) {
        goto cleanup;
    }
    /* States per depth: a token adds depths common + 1 .. length. */
    uint64_t states = 1;
    uint32_t common = UINT32_MAX; /* common prefix with the previous canonical token */
    for (uint32_t position = 0; position < order->count; position++) {
        uint32_t rank = order->rank[position];
        uint32_t shared = order->common_prefix[position];
        common = common < shared ? common : shared;
        if (!(vocab->rule_flags[rank] & TKI_FLAG_CANONICAL)) {
            continue;
        }
        uint32_t length = vocab->token_length[rank];
        uint32_t first_new = common == UINT32_MAX ? 1 : common + 1;
        for (uint32_t depth = first_new; depth <= length; depth++) {
            level_start[depth + 1]++;
        }
        states += length + 1 - first_new;
        common = length;
    }
    if (states > UINT32_MAX / TKI_TILE_WIDTH) {
        status = TKI_ERR_ARGUMENT;
        goto cleanup;
    }
    level_start[1] = 1;
    for (uint32_t depth = 1; depth <= max_depth; depth++) {
        level_start[depth + 1] += level_start[depth];
    }
    uint32_t count = (uint32_t)states;
    shape->first_child = malloc(((size_t)count + 1) * sizeof(uint32_t));
    shape->child_count = calloc(count, sizeof(uint16_t));
    shape->edge_byte = malloc(count);
    shape->state_id = malloc((size_t)count * sizeof(uint32_t));
    uint16_t *depth_of = malloc((size_t)count * sizeof(uint16_t));
    uint32_t *longest_token = malloc((size_t)count * sizeof(uint32_t));
    *out_longest_token = longest_token;
    *out_depth = depth_of;
    if (shape->first_child == NULL || shape->child_count == NULL || shape->edge_byte == NULL ||
        shape->state_id == NULL || depth_of == NULL || longest_token == NULL) {
        goto cleanup;
    }
    /* The states, in token order; level_start[d] counts up as depth d's states are made. */
    path[0] = 0;
    shape->first_child[0] = 0;
    shape->edge_byte[0] = 0;
    shape->state_id[0] = 0;
    depth_of[0] = 0;
    longest_token[0] = TKI_NONE;
    uint32_t next_id = 1;
    common = UINT32_MAX;
    for (uint32_t position = 0; position < order->count; position++) {
        uint32_t rank = order->rank[position];
        uint32_t shared = order->common_prefix[position];
        common = common < shared ? common : shared;
        if (!(vocab->rule_flags[rank] & TKI_FLAG_CANONICAL)) {
            continue;
        }
        const uint8_t *data = tki_token_data(vocab, rank);
        uint32_t length = vocab->token_length[rank];
        uint32_t first_new = common == UINT32_MAX ? 1 : common + 1;
        for (uint32_t depth = first_new; depth <= length; depth++) {
            uint32_t state = level_start[depth]++;
            uint32_t parent = path[depth - 1];
            if (shape->child_count[parent]++ == 0) {
                shape->first_child[parent] = state;
            }
            path[depth] = state;
            uint32_t id = next_id++;
            shape->first_child[state] = 0;
            shape->edge_byte[state] = data[depth - 1];
            shape->state_id[state] = id;
            depth_of[id] = (uint16_t)depth;
            longest_token[id] = TKI_NONE;
        }
        longest_token[shape->state_id[path[length]]] = rank;
        common = length;
    }
    *state_count = count;
    status = TKI_OK;
cleanup:
    free(level_start);
    free(path);
    return status;
}

int32_t tki_automaton_build(struct tki_vocab *vocab, const tki_token_order *order,
                            uint64_t *suffix_chain_nodes) {
    trie_shape shape = {NULL, NULL, NULL, NULL};
    uint32_t *block_of = NULL;      /* by id: the state's row block               */
    uint32_t *failure = NULL;       /* by index: the failure target's row block   */
    uint32_t *chain_length = NULL;  /* by rank */
    uint32_t *longest_token = NULL; /* by id: tau, until it goes into the rows */
    uint16_t *depth = NULL;         /* by id: until it goes into the rows      */
    uint32_t state_count = 0;
    int32_t status = build_trie(vocab, order, &shape, &longest_token, &depth, &state_count);
    if (status != TKI_OK) {
        goto cleanup;
    }
    status = TKI_ERR_NOMEM;
    block_of = malloc((size_t)state_count * sizeof(uint32_t));
    if (block_of == NULL) {
        goto cleanup;
    }
    /* Blocks in id order: each state's row, then its tiles (the root's 16, or
     * one per high nibble it has edges under): first each state's tile count,
     * then where its row goes. */
    block_of[0] = TKI_TILE_WIDTH;
    for (uint32_t s = 1; s < state_count; s++) {
        uint32_t previous_nibble = 256, owned = 0;
        for (uint32_t c = shape.first_child[s]; c < shape.first_child[s] + shape.child_count[s];
             c++) {
            uint32_t nibble = shape.edge_byte[c] >> 4;
            owned += nibble != previous_nibble;
            previous_nibble = nibble;
        }
        block_of[shape.state_id[s]] = owned;
    }
    uint64_t block_count = 0;
    for (uint32_t id = 0; id < state_count; id++) {
        uint32_t owned = block_of[id];
        block_of[id] = (uint32_t)(block_count < TKI_BLOCK_LIMIT ? block_count : 0);
        block_count += 1 + (uint64_t)owned;
    }
    if (block_count >= TKI_BLOCK_LIMIT) {
        status = TKI_AUTOMATON_TOO_LARGE;
        goto cleanup;
    }
    vocab->automaton = tki_table_alloc((size_t)block_count * TKI_TILE_WIDTH * sizeof(uint32_t));
    vocab->suffix_parent = malloc((size_t)vocab->rank_limit * sizeof(uint32_t));
    failure = malloc((size_t)state_count * sizeof(uint32_t));
    chain_length = calloc(vocab->rank_limit, sizeof(uint32_t));
    if (vocab->automaton == NULL || vocab->suffix_parent == NULL || failure == NULL ||
        chain_length == NULL) {
        goto cleanup;
    }
    for (uint32_t rank = 0; rank < vocab->rank_limit; rank++) {
        vocab->suffix_parent[rank] = TKI_NONE;
    }
    /* The root (row block 0): its 16 tiles, blocks 1..16, map every byte to its
     * child, or back to the root. */
    uint32_t *automaton = vocab->automaton;
    memset(automaton, 0, (1 + TKI_TILE_WIDTH) * TKI_TILE_WIDTH * sizeof(uint32_t));
    for (uint32_t h = 0; h < TKI_TILE_WIDTH; h++) {
        automaton[h] = 1 + h;
    }
    for (uint32_t c = shape.first_child[0]; c < shape.first_child[0] + shape.child_count[0]; c++) {
        uint32_t byte = shape.edge_byte[c];
        automaton[(size_t)(1 + (byte >> 4)) * TKI_TILE_WIDTH + (byte & 15u)] = block_of[shape.state_id[c]];
    }
    failure[0] = 0;
    uint32_t longest_chain = 0;
    uint64_t chain_nodes = 0;
    /* Breadth-first: a failure target is always complete before it is used. */
    for (uint32_t s = 0; s < state_count; s++) {
        uint32_t children_end = shape.first_child[s] + shape.child_count[s];
        uint32_t id = shape.state_id[s];
        uint32_t block = block_of[id];
        uint32_t *row = automaton + (size_t)block * TKI_TILE_WIDTH;
        uint32_t tau = longest_token[id];
        uint32_t owned = TKI_TILE_WIDTH; /* tiles after the row: the root's 16 */
        if (s != 0) {
            uint32_t fail = failure[s];
            uint32_t tile = block + 1; /* its own tiles follow its row */
            const uint32_t *inherited = automaton + (size_t)fail * TKI_TILE_WIDTH;
            for (uint32_t h = 0; h < TKI_TILE_WIDTH; h++) {
                row[h] = inherited[h] & TKI_TILE_ID_MASK;
            }
            uint32_t previous_nibble = 256;
            for (uint32_t c = shape.first_child[s]; c < children_end; c++) {
                uint32_t nibble = shape.edge_byte[c] >> 4;
                if (nibble != previous_nibble) {
                    memcpy(automaton + (size_t)tile * TKI_TILE_WIDTH,
                           automaton + (size_t)row[nibble] * TKI_TILE_WIDTH,
                           TKI_TILE_WIDTH * sizeof(uint32_t));
                    row[nibble] = tile++;
                    previous_nibble = nibble;
                }
                automaton[(size_t)row[nibble] * TKI_TILE_WIDTH + (shape.edge_byte[c] & 15u)] =
                    block_of[shape.state_id[c]];
            }
            owned = tile - (block + 1);
            uint32_t inherited_token = tki_state_tau(vocab, fail);
            if (tau != TKI_NONE) {
                vocab->suffix_parent[tau] = inherited_token;
                chain_length[tau] = 1 + (inherited_token == TKI_NONE ? 0 : chain_length[inherited_token]);
                chain_nodes += chain_length[tau];
                if (chain_length[tau] > longest_chain) {
                    longest_chain = chain_length[tau];
                }
            } else {
                tau = inherited_token;
            }
        }
        uint32_t tau_parent = tau == TKI_NONE ? TKI_NONE : vocab->suffix_parent[tau];
        for (uint32_t byte = 0; byte < 4; byte++) { /* tau, its parent: top bytes of words 0..3, 7..10 */
            row[byte] |= ((tau >> (8 * byte)) & 0xFFu) << TKI_TILE_ID_BITS;
            row[7 + byte] |= ((tau_parent >> (8 * byte)) & 0xFFu) << TKI_TILE_ID_BITS;
        }
        row[4] |= (uint32_t)(depth[id] & 0xFFu) << TKI_TILE_ID_BITS;
        row[5] |= (uint32_t)(depth[id] >> 8) << TKI_TILE_ID_BITS;
        row[6] |= owned << TKI_TILE_ID_BITS;
        for (uint32_t c = shape.first_child[s]; c < children_end; c++) {
            failure[c] = s == 0 ? 0 : tki_automaton_next(vocab, failure[s], shape.edge_byte[c]);
        }
    }
    vocab->state_count = state_count;
    vocab->automaton_blocks = (uint32_t)block_count;
    vocab->longest_suffix_chain = longest_chain;
    *suffix_chain_nodes = chain_nodes;
    status = build_block_keys(vocab);

cleanup:
    free(shape.first_child);
    free(shape.child_count);
    free(shape.edge_byte);
    free(shape.state_id);
    free(block_of);
    free(depth);
    free(failure);
    free(chain_length);
    free(longest_token);
    if (status != TKI_OK) {
        tki_automaton_free(vocab);
    }
    return status;
}
