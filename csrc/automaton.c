/*
 * automaton.c — the Aho-Corasick automaton over the canonical tokens.
 *
 * After each byte the state is the longest suffix of the text that is a
 * prefix of some canonical token, and tau(state) is the longest canonical
 * token that is a suffix of the text.  Transitions are O(1) worst case, never
 * a failure-link loop: a byte is split into its high and low nibble; a state's
 * row holds 16 tile indices (and tau, in their top bytes: internal.h), a tile
 * holds 16 next states.  A state starts from its failure target's tiles and
 * owns a copy only of the tiles where it has trie edges of its own, so tiles
 * are shared.
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
 * The ids the tables use are another numbering: the order in which the
 * tokens make the states, which is the trie's pre-order (a state, then its
 * subtrees in byte order).  A walk down the trie then mostly moves to nearby
 * rows (to the next one, for a first child) instead of a row in the next
 * depth's block, and a state's own tiles are numbered in the same order; on
 * real text the steps' cache misses are fewer.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void tki_automaton_free(struct tki_vocab *vocab) {
    free(vocab->state_tiles);
    free(vocab->tiles);
    free(vocab->suffix_parent);
    free(vocab->state_depth);
    vocab->state_depth = NULL;
    vocab->state_tiles = NULL;
    vocab->tiles = NULL;
    vocab->suffix_parent = NULL;
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
 * numbers them (pre-order) and fills `shape`, vocab->state_depth and
 * *longest_token (allocated here: by id, the token ending there, or
 * TKI_NONE).  Returns the number of states in *state_count.
 */
static int32_t build_trie(struct tki_vocab *vocab, const tki_token_order *order, trie_shape *shape,
                          uint32_t **out_longest_token, uint32_t *state_count) {
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
    vocab->state_depth = malloc((size_t)count * sizeof(uint16_t));
    uint32_t *longest_token = malloc((size_t)count * sizeof(uint32_t));
    *out_longest_token = longest_token;
    if (shape->first_child == NULL || shape->child_count == NULL || shape->edge_byte == NULL ||
        shape->state_id == NULL || vocab->state_depth == NULL || longest_token == NULL) {
        goto cleanup;
    }
    /* The states, in token order; level_start[d] counts up as depth d's states are made. */
    path[0] = 0;
    shape->first_child[0] = 0;
    shape->edge_byte[0] = 0;
    shape->state_id[0] = 0;
    vocab->state_depth[0] = 0;
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
            vocab->state_depth[id] = (uint16_t)depth;
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
    uint32_t *own_tiles = NULL;     /* by id: the first tile the state owns */
    uint32_t *failure = NULL;       /* by index: the failure target's id */
    uint32_t *chain_length = NULL;  /* by rank */
    uint32_t *longest_token = NULL; /* by id: tau, until it goes into the rows */
    uint32_t state_count = 0;
    int32_t status = build_trie(vocab, order, &shape, &longest_token, &state_count);
    if (status != TKI_OK) {
        goto cleanup;
    }
    status = TKI_ERR_NOMEM;
    own_tiles = malloc((size_t)state_count * sizeof(uint32_t));
    if (own_tiles == NULL) {
        goto cleanup;
    }
    /* The root's 16 tiles, then a tile per other state and high nibble it has
     * edges under, numbered in id order: first each state's count, then where
     * its tiles start. */
    own_tiles[0] = 0;
    for (uint32_t s = 1; s < state_count; s++) {
        uint32_t previous_nibble = 256, owned = 0;
        for (uint32_t c = shape.first_child[s]; c < shape.first_child[s] + shape.child_count[s];
             c++) {
            uint32_t nibble = shape.edge_byte[c] >> 4;
            owned += nibble != previous_nibble;
            previous_nibble = nibble;
        }
        own_tiles[shape.state_id[s]] = owned;
    }
    uint64_t tile_capacity = TKI_TILE_WIDTH;
    for (uint32_t id = 1; id < state_count; id++) {
        uint32_t owned = own_tiles[id];
        own_tiles[id] = (uint32_t)(tile_capacity < TKI_TILE_LIMIT ? tile_capacity : 0);
        tile_capacity += owned;
    }
    if (tile_capacity >= TKI_TILE_LIMIT) {
        status = TKI_AUTOMATON_TOO_LARGE;
        goto cleanup;
    }
    vocab->state_tiles = tki_table_alloc((size_t)state_count * TKI_TILE_WIDTH * sizeof(uint32_t));
    vocab->tiles = tki_table_alloc((size_t)tile_capacity * TKI_TILE_WIDTH * sizeof(uint32_t));
    vocab->suffix_parent = malloc((size_t)vocab->rank_limit * sizeof(uint32_t));
    failure = malloc((size_t)state_count * sizeof(uint32_t));
    chain_length = calloc(vocab->rank_limit, sizeof(uint32_t));
    if (vocab->state_tiles == NULL || vocab->tiles == NULL || vocab->suffix_parent == NULL ||
        failure == NULL || chain_length == NULL) {
        goto cleanup;
    }
    for (uint32_t rank = 0; rank < vocab->rank_limit; rank++) {
        vocab->suffix_parent[rank] = TKI_NONE;
    }
    /* The root: its 16 tiles map every byte to its child, or back to the root. */
    memset(vocab->tiles, 0, TKI_TILE_WIDTH * TKI_TILE_WIDTH * sizeof(uint32_t));
    for (uint32_t h = 0; h < TKI_TILE_WIDTH; h++) {
        vocab->state_tiles[h] = h;
    }
    for (uint32_t c = shape.first_child[0]; c < shape.first_child[0] + shape.child_count[0]; c++) {
        vocab->tiles[shape.edge_byte[c]] = shape.state_id[c]; /* tile h, entry l = byte h*16+l */
    }
    failure[0] = 0;
    uint32_t longest_chain = 0;
    uint64_t chain_nodes = 0;
    /* Breadth-first: a failure target is always complete before it is used. */
    for (uint32_t s = 0; s < state_count; s++) {
        uint32_t children_end = shape.first_child[s] + shape.child_count[s];
        uint32_t id = shape.state_id[s];
        if (s != 0) {
            uint32_t fail = failure[s];
            uint32_t tile_count = own_tiles[id];
            const uint32_t *inherited = vocab->state_tiles + (size_t)fail * TKI_TILE_WIDTH;
            uint32_t *own = vocab->state_tiles + (size_t)id * TKI_TILE_WIDTH;
            for (uint32_t h = 0; h < TKI_TILE_WIDTH; h++) {
                own[h] = inherited[h] & TKI_TILE_ID_MASK;
            }
            uint32_t previous_nibble = 256;
            for (uint32_t c = shape.first_child[s]; c < children_end; c++) {
                uint32_t nibble = shape.edge_byte[c] >> 4;
                if (nibble != previous_nibble) {
                    uint32_t *tile = vocab->tiles + (size_t)tile_count * TKI_TILE_WIDTH;
                    memcpy(tile, vocab->tiles + (size_t)own[nibble] * TKI_TILE_WIDTH,
                           TKI_TILE_WIDTH * sizeof(uint32_t));
                    own[nibble] = tile_count++;
                    previous_nibble = nibble;
                }
                vocab->tiles[(size_t)own[nibble] * TKI_TILE_WIDTH + (shape.edge_byte[c] & 15u)] =
                    shape.state_id[c];
            }
            uint32_t rank = longest_token[id];
            uint32_t inherited_token = longest_token[fail];
            if (rank != TKI_NONE) {
                vocab->suffix_parent[rank] = inherited_token;
                chain_length[rank] =
                    1 + (inherited_token == TKI_NONE ? 0 : chain_length[inherited_token]);
                chain_nodes += chain_length[rank];
                if (chain_length[rank] > longest_chain) {
                    longest_chain = chain_length[rank];
                }
            } else {
                longest_token[id] = inherited_token;
            }
        }
        uint32_t *row = vocab->state_tiles + (size_t)id * TKI_TILE_WIDTH;
        for (uint32_t byte = 0; byte < 4; byte++) { /* tau into the top bytes of words 0..3 */
            row[byte] |= ((longest_token[id] >> (8 * byte)) & 0xFFu) << TKI_TILE_ID_BITS;
        }
        for (uint32_t c = shape.first_child[s]; c < children_end; c++) {
            failure[c] = s == 0 ? 0 : tki_automaton_next(vocab, failure[s], shape.edge_byte[c]);
        }
    }
    vocab->state_count = state_count;
    vocab->tile_count = (uint32_t)tile_capacity;
    vocab->longest_suffix_chain = longest_chain;
    *suffix_chain_nodes = chain_nodes;
    status = TKI_OK;

cleanup:
    free(shape.first_child);
    free(shape.child_count);
    free(shape.edge_byte);
    free(shape.state_id);
    free(own_tiles);
    free(failure);
    free(chain_length);
    free(longest_token);
    if (status != TKI_OK) {
        tki_automaton_free(vocab);
    }
    return status;
}
