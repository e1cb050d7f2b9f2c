/*
 * automaton.c — the Aho-Corasick automaton over the canonical tokens.
 *
 * After each byte the state is the longest suffix of the text that is a
 * prefix of some canonical token, and longest_token[state] (tau) is the
 * longest canonical token that is a suffix of the text.  Transitions are
 * O(1) worst case, never a failure-link loop: a byte is split into its high
 * and low nibble; a state holds 16 tile indices, a tile holds 16 next states.
 * A state starts from its failure target's tiles and owns a copy only of the
 * tiles where it has trie edges of its own, so rows are shared.
 *
 * Also derived here: suffix_parent[z], the longest proper canonical suffix of
 * each canonical token (tau of its state's failure target), and the length of
 * the longest suffix chain, which sizes the centroid decompositions.
 *
 * Build: trie edges are created with a temporary (state, byte) hash, sorted
 * by (parent, byte) into adjacency arrays, then states are visited
 * breadth-first so that a failure target is always complete before it is used,
 * and finally renumbered in that order (the root stays 0).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct trie_edges {
    uint32_t count;
    uint32_t *parent;
    uint32_t *child;
    uint8_t *byte;
} trie_edges;

typedef struct edge_hash {
    uint64_t mask;
    uint64_t *keys; /* (parent << 8 | byte) + 1; 0 means empty */
    uint32_t *child;
} edge_hash;

static uint64_t mix64(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return key;
}

/* Child of `parent` by `byte`, created (as state *state_count) when absent. */
static uint32_t trie_child(edge_hash *hash, trie_edges *edges, uint32_t *state_count,
                           uint32_t parent, uint8_t byte) {
    uint64_t key = (((uint64_t)parent << 8) | byte) + 1;
    uint64_t slot = mix64(key) & hash->mask;
    while (hash->keys[slot] != 0) {
        if (hash->keys[slot] == key) {
            return hash->child[slot];
        }
        slot = (slot + 1) & hash->mask;
    }
    uint32_t child = (*state_count)++;
    hash->keys[slot] = key;
    hash->child[slot] = child;
    edges->parent[edges->count] = parent;
    edges->child[edges->count] = child;
    edges->byte[edges->count] = byte;
    edges->count++;
    return child;
}

void tki_automaton_free(struct tki_vocab *vocab) {
    free(vocab->state_tiles);
    free(vocab->tiles);
    free(vocab->longest_token);
    free(vocab->suffix_parent);
    free(vocab->state_depth);
    vocab->state_depth = NULL;
    vocab->state_tiles = NULL;
    vocab->tiles = NULL;
    vocab->longest_token = NULL;
    vocab->suffix_parent = NULL;
}

/*
 * Renumbers the states in breadth-first order (`order`), so the shallow
 * states that real text visits most share cache lines.  `scratch` has room
 * for one entry per state.
 */
static int32_t renumber_breadth_first(struct tki_vocab *vocab, const uint32_t *order,
                                      uint32_t *scratch) {
    uint32_t states = vocab->state_count;
    uint32_t *new_id = scratch;
    uint32_t *rows = malloc((size_t)states * TKI_TILE_WIDTH * sizeof(uint32_t));
    uint32_t *tokens = malloc((size_t)states * sizeof(uint32_t));
    uint16_t *depths = malloc((size_t)states * sizeof(uint16_t));
    if (rows == NULL || tokens == NULL || depths == NULL) {
        free(rows);
        free(tokens);
        free(depths);
        return TKI_ERR_NOMEM;
    }
    for (uint32_t position = 0; position < states; position++) {
        new_id[order[position]] = position;
    }
    for (uint32_t old = 0; old < states; old++) {
        memcpy(rows + (size_t)new_id[old] * TKI_TILE_WIDTH,
               vocab->state_tiles + (size_t)old * TKI_TILE_WIDTH, TKI_TILE_WIDTH * sizeof(uint32_t));
        tokens[new_id[old]] = vocab->longest_token[old];
        depths[new_id[old]] = vocab->state_depth[old];
    }
    for (size_t entry = 0; entry < (size_t)vocab->tile_count * TKI_TILE_WIDTH; entry++) {
        vocab->tiles[entry] = new_id[vocab->tiles[entry]];
    }
    free(vocab->state_tiles);
    free(vocab->longest_token);
    free(vocab->state_depth);
    vocab->state_tiles = rows;
    vocab->longest_token = tokens;
    vocab->state_depth = depths;
    return TKI_OK;
}

int32_t tki_automaton_build(struct tki_vocab *vocab) {
    int32_t status = TKI_ERR_NOMEM;
    uint64_t canonical_bytes = 0;
    for (uint32_t rank = 0; rank < vocab->rank_limit; rank++) {
        if (vocab->rule_flags[rank] & TKI_FLAG_CANONICAL) {
            canonical_bytes += vocab->token_length[rank];
        }
    }
    if (canonical_bytes + 1 > UINT32_MAX / TKI_TILE_WIDTH) {
        return TKI_ERR_ARGUMENT;
    }
    uint32_t max_states = (uint32_t)canonical_bytes + 1;
    uint64_t hash_capacity = 16;
    while (hash_capacity < (uint64_t)max_states * 2) {
        hash_capacity *= 2;
    }
    trie_edges edges = {0, NULL, NULL, NULL};
    edge_hash hash = {hash_capacity - 1, NULL, NULL};
    uint32_t *terminal = NULL;      /* by state: the canonical token ending here */
    uint32_t *order = NULL;         /* edges sorted by (parent, byte)           */
    uint32_t *first_edge = NULL;    /* by state: start of its edges in order    */
    uint32_t *failure = NULL;
    uint32_t *queue = NULL;
    uint32_t *chain_length = NULL;  /* by rank                                 */
    uint32_t *bucket = NULL;

    edges.parent = malloc(max_states * sizeof(uint32_t));
    edges.child = malloc(max_states * sizeof(uint32_t));
    edges.byte = malloc(max_states);
    hash.keys = calloc(hash_capacity, sizeof(uint64_t));
    hash.child = malloc(hash_capacity * sizeof(uint32_t));
    terminal = malloc(max_states * sizeof(uint32_t));
    if (edges.parent == NULL || edges.child == NULL || edges.byte == NULL ||
        hash.keys == NULL || hash.child == NULL || terminal == NULL) {
        goto cleanup;
    }

    /* 1. The trie. */
    uint32_t state_count = 1;
    terminal[0] = TKI_NONE;
    for (uint32_t rank = 0; rank < vocab->rank_limit; rank++) {
        if (!(vocab->rule_flags[rank] & TKI_FLAG_CANONICAL)) {
            continue;
        }
        const uint8_t *data = tki_token_data(vocab, rank);
        uint32_t state = 0;
        for (uint32_t i = 0; i < vocab->token_length[rank]; i++) {
            uint32_t before = state_count;
            state = trie_child(&hash, &edges, &state_count, state, data[i]);
            if (state_count != before) {
                terminal[state] = TKI_NONE;
            }
        }
        terminal[state] = rank;
    }
    free(hash.keys);
    free(hash.child);
    hash.keys = NULL;
    hash.child = NULL;

    /* 2. Edges sorted by (parent, byte): counting sort by byte, then stably by parent. */
    order = malloc((edges.count + 1) * sizeof(uint32_t));
    first_edge = calloc((size_t)state_count + 1, sizeof(uint32_t));
    bucket = malloc(((size_t)edges.count + 1) * sizeof(uint32_t));
    if (order == NULL || first_edge == NULL || bucket == NULL) {
        goto cleanup;
    }
    {
        uint32_t byte_start[257] = {0};
        for (uint32_t e = 0; e < edges.count; e++) {
            byte_start[edges.byte[e] + 1]++;
        }
        for (uint32_t b = 0; b < 256; b++) {
            byte_start[b + 1] += byte_start[b];
        }
        for (uint32_t e = 0; e < edges.count; e++) {
            bucket[byte_start[edges.byte[e]]++] = e;
        }
        for (uint32_t e = 0; e < edges.count; e++) {
            first_edge[edges.parent[e] + 1]++;
        }
        for (uint32_t s = 0; s < state_count; s++) {
            first_edge[s + 1] += first_edge[s];
        }
        /* Place stably: walk the byte-sorted list, filling each parent's range. */
        uint32_t *fill = queue = malloc(((size_t)state_count + 1) * sizeof(uint32_t));
        if (fill == NULL) {
            goto cleanup;
        }
        memcpy(fill, first_edge, ((size_t)state_count + 1) * sizeof(uint32_t));
        for (uint32_t i = 0; i < edges.count; i++) {
            uint32_t e = bucket[i];
            order[fill[edges.parent[e]]++] = e;
        }
    }

    /* 3. Breadth-first: failure links, tiles, tau, suffix parents. */
    uint32_t tile_capacity = TKI_TILE_WIDTH;
    for (uint32_t s = 0; s < state_count; s++) {
        uint32_t previous_nibble = 256;
        for (uint32_t i = first_edge[s]; i < first_edge[s + 1]; i++) {
            uint32_t nibble = edges.byte[order[i]] >> 4;
            if (nibble != previous_nibble) {
                tile_capacity++;
                previous_nibble = nibble;
            }
        }
    }
    vocab->state_tiles = malloc((size_t)state_count * TKI_TILE_WIDTH * sizeof(uint32_t));
    vocab->tiles = malloc((size_t)tile_capacity * TKI_TILE_WIDTH * sizeof(uint32_t));
    vocab->longest_token = malloc((size_t)state_count * sizeof(uint32_t));
    vocab->suffix_parent = malloc((size_t)vocab->rank_limit * sizeof(uint32_t));
    vocab->state_depth = malloc((size_t)state_count * sizeof(uint16_t));
    failure = malloc((size_t)state_count * sizeof(uint32_t));
    chain_length = calloc(vocab->rank_limit, sizeof(uint32_t));
    if (vocab->state_tiles == NULL || vocab->tiles == NULL || vocab->longest_token == NULL ||
        vocab->suffix_parent == NULL || vocab->state_depth == NULL || failure == NULL ||
        chain_length == NULL) {
        goto cleanup;
    }
    for (uint32_t rank = 0; rank < vocab->rank_limit; rank++) {
        vocab->suffix_parent[rank] = TKI_NONE;
    }
    /* The root: its 16 tiles map every byte to its child, or back to the root. */
    uint32_t tile_count = TKI_TILE_WIDTH;
    memset(vocab->tiles, 0, TKI_TILE_WIDTH * TKI_TILE_WIDTH * sizeof(uint32_t));
    for (uint32_t h = 0; h < TKI_TILE_WIDTH; h++) {
        vocab->state_tiles[h] = h;
    }
    for (uint32_t i = first_edge[0]; i < first_edge[1]; i++) {
        uint32_t e = order[i];
        vocab->tiles[edges.byte[e]] = edges.child[e]; /* tile h, entry l = byte h*16+l */
    }
    failure[0] = 0;
    vocab->longest_token[0] = TKI_NONE;
    vocab->state_depth[0] = 0;
    uint32_t longest_chain = 0;
    uint32_t head = 0, tail = 0;
    queue[tail++] = 0;
    while (head < tail) {
        uint32_t s = queue[head++];
        if (s != 0) {
            uint32_t fail = failure[s];
            const uint32_t *inherited = vocab->state_tiles + (size_t)fail * TKI_TILE_WIDTH;
            uint32_t *own = vocab->state_tiles + (size_t)s * TKI_TILE_WIDTH;
            memcpy(own, inherited, TKI_TILE_WIDTH * sizeof(uint32_t));
            for (uint32_t i = first_edge[s]; i < first_edge[s + 1]; i++) {
                uint32_t e = order[i];
                uint32_t nibble = edges.byte[e] >> 4;
                if (i == first_edge[s] || (edges.byte[order[i - 1]] >> 4) != nibble) {
                    uint32_t *tile = vocab->tiles + (size_t)tile_count * TKI_TILE_WIDTH;
                    memcpy(tile, vocab->tiles + (size_t)inherited[nibble] * TKI_TILE_WIDTH,
                           TKI_TILE_WIDTH * sizeof(uint32_t));
                    own[nibble] = tile_count++;
                }
                vocab->tiles[(size_t)own[nibble] * TKI_TILE_WIDTH + (edges.byte[e] & 15u)] =
                    edges.child[e];
            }
            uint32_t rank = terminal[s];
            uint32_t inherited_token = vocab->longest_token[fail];
            vocab->longest_token[s] = rank != TKI_NONE ? rank : inherited_token;
            if (rank != TKI_NONE) {
                vocab->suffix_parent[rank] = inherited_token;
                chain_length[rank] =
                    1 + (inherited_token == TKI_NONE ? 0 : chain_length[inherited_token]);
                if (chain_length[rank] > longest_chain) {
                    longest_chain = chain_length[rank];
                }
            }
        }
        for (uint32_t i = first_edge[s]; i < first_edge[s + 1]; i++) {
            uint32_t e = order[i];
            uint32_t child = edges.child[e];
            failure[child] = s == 0 ? 0 : tki_automaton_next(vocab, failure[s], edges.byte[e]);
            vocab->state_depth[child] = (uint16_t)(vocab->state_depth[s] + 1);
            queue[tail++] = child;
        }
    }
    vocab->state_count = state_count;
    vocab->tile_count = tile_count;
    vocab->longest_suffix_chain = longest_chain;
    status = renumber_breadth_first(vocab, queue, failure);

cleanup:
    free(edges.parent);
    free(edges.child);
    free(edges.byte);
    free(hash.keys);
    free(hash.child);
    free(terminal);
    free(order);
    free(first_edge);
    free(failure);
    free(queue);
    free(chain_length);
    free(bucket);
    if (status != TKI_OK) {
        tki_automaton_free(vocab);
    }
    return status;
}
