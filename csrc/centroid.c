/*
 * centroid.c — per token x, a centroid decomposition of T(x), the tree of
 * x's canonical suffixes (nodes: the suffix_parent chain of x; parent of y:
 * suc(y); root: the last byte).
 *
 * When the fast path fails, the true last token theta is the deepest locally
 * valid node of T(z), and the valid nodes are exactly the path from the root
 * to theta.  Searching the decomposition keeps theta inside the current part
 * K: test the centroid u; if u is not valid, theta lies in the part that
 * holds suc(u) ("up"); if it is, every child v of u in K has suc(v) = u, so
 * one value w = last(n - |u|) is tested against their pairwise disjoint
 * intervals by binary search.  The depth is at most log2(chain) + 1, so a
 * search costs O(log^2 t) worst case.
 *
 * Layout: one block per token, block[0] the first centroid; a node's entries
 * are contiguous (parts below sorted by the key_lo of their node adjacent to
 * u, then the up part), which is what the binary search reads.  The blocks go
 * in the order of the tokens' automaton states (the trie's pre-order, i.e. the
 * tokens in byte order), so the searches of nearby steps, whose tokens are
 * often prefixes of one another, read nearby blocks.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct part_task {
    uint32_t start;     /* a chain index inside the part        */
    uint32_t position;  /* where its decomposition node goes    */
} part_task;

/* What the decomposition reads of one node of a chain, gathered as the chain is walked. */
typedef struct chain_link {
    uint32_t suffix_parent;
    uint32_t valid_lo;
    uint32_t valid_hi;
    uint16_t length;
    uint16_t suc_length;
} chain_link;

typedef struct centroid_scratch {
    uint32_t *chain;          /* chain index -> rank                    */
    uint32_t *key_lo;         /* chain index -> its valid interval      */
    uint32_t *key_hi;
    uint16_t *node_length;    /* chain index -> token length            */
    uint32_t *index_of_length;/* token length -> chain index            */
    uint32_t *tree_parent;    /* chain index -> chain index of suc      */
    uint32_t *child_start;    /* CSR of tree children                   */
    uint32_t *children;
    uint32_t *fill;
    uint8_t *removed;
    uint32_t *order;          /* BFS order inside one part              */
    uint32_t *bfs_parent;
    uint32_t *subtree;
    part_task *tasks;
    uint32_t *entry_nodes;    /* the parts below one centroid, to sort  */
} centroid_scratch;

static void scratch_free(centroid_scratch *s) {
    free(s->chain);
    free(s->key_lo);
    free(s->key_hi);
    free(s->node_length);
    free(s->index_of_length);
    free(s->tree_parent);
    free(s->child_start);
    free(s->children);
    free(s->fill);
    free(s->removed);
    free(s->order);
    free(s->bfs_parent);
    free(s->subtree);
    free(s->tasks);
    free(s->entry_nodes);
    memset(s, 0, sizeof(*s)); /* freeing twice is harmless */
}

static int32_t scratch_init(centroid_scratch *s, uint32_t chain_capacity, uint32_t max_bytes) {
    size_t n = (size_t)chain_capacity + 1;
    memset(s, 0, sizeof(*s));
    s->chain = malloc(n * sizeof(uint32_t));
    s->key_lo = malloc(n * sizeof(uint32_t));
    s->key_hi = malloc(n * sizeof(uint32_t));
    s->node_length = malloc(n * sizeof(uint16_t));
    s->index_of_length = malloc(((size_t)max_bytes + 1) * sizeof(uint32_t));
    s->tree_parent = malloc(n * sizeof(uint32_t));
    s->child_start = malloc((n + 1) * sizeof(uint32_t));
    s->children = malloc(n * sizeof(uint32_t));
    s->fill = malloc((n + 1) * sizeof(uint32_t));
    s->removed = malloc(n);
    s->order = malloc(n * sizeof(uint32_t));
    s->bfs_parent = malloc(n * sizeof(uint32_t));
    s->subtree = malloc(n * sizeof(uint32_t));
    s->tasks = malloc(n * sizeof(part_task));
    s->entry_nodes = malloc(n * sizeof(uint32_t));
    if (s->chain == NULL || s->key_lo == NULL || s->key_hi == NULL || s->node_length == NULL ||
        s->index_of_length == NULL || s->tree_parent == NULL ||
        s->child_start == NULL || s->children == NULL || s->fill == NULL || s->removed == NULL ||
        s->order == NULL || s->bfs_parent == NULL || s->subtree == NULL || s->tasks == NULL ||
        s->entry_nodes == NULL) {
        scratch_free(s);
        return TKI_ERR_NOMEM;
    }
    for (size_t i = 0; i <= max_bytes; i++) {
        s->index_of_length[i] = TKI_NONE;
    }
    return TKI_OK;
}

/* The centroid of the part that contains `start` (nodes not removed). */
static uint32_t find_centroid(centroid_scratch *s, uint32_t start) {
    uint32_t head = 0, tail = 0;
    s->order[tail++] = start;
    s->bfs_parent[start] = TKI_NONE;
    while (head < tail) {
        uint32_t node = s->order[head++];
        uint32_t parent = s->tree_parent[node];
        if (parent != TKI_NONE && !s->removed[parent] && parent != s->bfs_parent[node]) {
            s->bfs_parent[parent] = node;
            s->order[tail++] = parent;
        }
        for (uint32_t i = s->child_start[node]; i < s->child_start[node + 1]; i++) {
            uint32_t child = s->children[i];
            if (!s->removed[child] && child != s->bfs_parent[node]) {
                s->bfs_parent[child] = node;
                s->order[tail++] = child;
            }
        }
    }
    uint32_t total = tail;
    for (uint32_t i = total; i-- > 0;) {
        s->subtree[s->order[i]] = 1;
    }
    for (uint32_t i = total; i-- > 1;) {
        s->subtree[s->bfs_parent[s->order[i]]] += s->subtree[s->order[i]];
    }
    /* Walk from the start toward any neighbour holding more than half. */
    uint32_t node = start;
    for (;;) {
        uint32_t heavy = TKI_NONE;
        uint32_t parent = s->tree_parent[node];
        if (parent != TKI_NONE && !s->removed[parent] && s->bfs_parent[parent] == node &&
            s->subtree[parent] * 2 > total) {
            heavy = parent;
        }
        for (uint32_t i = s->child_start[node]; heavy == TKI_NONE && i < s->child_start[node + 1];
             i++) {
            uint32_t child = s->children[i];
            if (!s->removed[child] && s->bfs_parent[child] == node &&
                s->subtree[child] * 2 > total) {
                heavy = child;
            }
        }
        if (heavy == TKI_NONE) {
            return node;
        }
        node = heavy;
    }
}

/*
 * Builds the block of one token into nodes[0 .. length), from its suffix
 * chain: chain_ranks[i] and chain[i] for its i-th longest canonical suffix.
 */
static int32_t decompose_token(centroid_scratch *s, const uint32_t *chain_ranks,
                               const chain_link *chain, uint32_t length,
                               tki_decomposition_node *nodes) {
    for (uint32_t i = 0; i < length; i++) {
        s->chain[i] = chain_ranks[i];
        s->key_lo[i] = chain[i].valid_lo;
        s->key_hi[i] = chain[i].valid_hi;
        s->node_length[i] = chain[i].length;
        s->tree_parent[i] = chain[i].suc_length; /* a length for now; an index below */
        s->index_of_length[chain[i].length] = i;
    }
    int32_t status = TKI_OK;
    for (uint32_t i = 0; i < length; i++) {
        uint32_t suc_length = s->tree_parent[i];
        s->tree_parent[i] = TKI_NONE;
        if (suc_length > 0) {
            s->tree_parent[i] = s->index_of_length[suc_length];
            if (s->tree_parent[i] == TKI_NONE) {
                status = TKI_ERR_INTERNAL; /* suc(y) must be a canonical suffix of x */
            }
        }
        s->removed[i] = 0;
    }
    if (status != TKI_OK) {
        goto done;
    }
    memset(s->child_start, 0, ((size_t)length + 1) * sizeof(uint32_t));
    for (uint32_t i = 0; i < length; i++) {
        if (s->tree_parent[i] != TKI_NONE) {
            s->child_start[s->tree_parent[i] + 1]++;
        }
    }
    for (uint32_t i = 0; i < length; i++) {
        s->child_start[i + 1] += s->child_start[i];
    }
    memcpy(s->fill, s->child_start, ((size_t)length + 1) * sizeof(uint32_t));
    for (uint32_t i = 0; i < length; i++) {
        if (s->tree_parent[i] != TKI_NONE) {
            s->children[s->fill[s->tree_parent[i]]++] = i;
        }
    }

    uint32_t task_head = 0, task_tail = 0, next_free = 1;
    s->tasks[task_tail++] = (part_task){length - 1, 0};
    nodes[0].key_lo = 0;
    nodes[0].key_hi = 0;
    while (task_head < task_tail) {
        part_task task = s->tasks[task_head++];
        uint32_t u = find_centroid(s, task.start);
        s->removed[u] = 1;
        tki_decomposition_node *node = &nodes[task.position];
        node->token = s->chain[u];
        /* Parts below u, sorted by their adjacent node's key (insertion sort: few). */
        uint32_t below = 0;
        for (uint32_t i = s->child_start[u]; i < s->child_start[u + 1]; i++) {
            uint32_t v = s->children[i];
            if (s->removed[v]) {
                continue;
            }
            uint32_t key = s->key_lo[v];
            uint32_t at = below++;
            while (at > 0 && s->key_lo[s->entry_nodes[at - 1]] > key) {
                s->entry_nodes[at] = s->entry_nodes[at - 1];
                at--;
            }
            s->entry_nodes[at] = v;
        }
        uint32_t up = s->tree_parent[u];
        uint32_t has_up = up != TKI_NONE && !s->removed[up];
        if (next_free > UINT16_MAX || below > 0x7fffu) {
            status = TKI_ERR_INTERNAL;
            goto done;
        }
        node->first_entry = (uint16_t)next_free;
        node->entries = (uint16_t)(below | (has_up ? 0x8000u : 0u));
        for (uint32_t i = 0; i < below; i++) {
            uint32_t v = s->entry_nodes[i];
            tki_decomposition_node *entry = &nodes[next_free];
            entry->key_lo = s->key_lo[v];
            entry->key_hi = s->key_hi[v];
            s->tasks[task_tail++] = (part_task){v, next_free};
            next_free++;
        }
        if (has_up) {
            nodes[next_free].key_lo = 0;
            nodes[next_free].key_hi = 0;
            s->tasks[task_tail++] = (part_task){up, next_free};
            next_free++;
        }
    }
    if (next_free != length) {
        status = TKI_ERR_INTERNAL;
    }
done:
    for (uint32_t i = 0; i < length; i++) {
        s->index_of_length[s->node_length[i]] = TKI_NONE;
    }
    return status;
}

void tki_centroid_free(struct tki_vocab *vocab) {
    free(vocab->decomposition_start);
    free(vocab->decomposition);
    vocab->decomposition_start = NULL;
    vocab->decomposition = NULL;
    vocab->decomposition_nodes = 0;
}

/*
 * Walking a chain is a cache miss per node, each waiting for the one before:
 * CENTROID_LANES tokens' chains are walked side by side, so their misses
 * overlap, then decomposed one by one.
 */
#define CENTROID_LANES 8u

int32_t tki_centroid_build(struct tki_vocab *vocab, uint64_t total_nodes) {
    if (total_nodes >= UINT32_MAX) {
        return TKI_ERR_ARGUMENT;
    }
    int32_t status = TKI_ERR_NOMEM;
    size_t capacity = (size_t)vocab->longest_suffix_chain + 1;
    chain_link *lane_chain = malloc(CENTROID_LANES * capacity * sizeof(chain_link));
    uint32_t *lane_ranks = malloc(CENTROID_LANES * capacity * sizeof(uint32_t));
    centroid_scratch scratch;
    memset(&scratch, 0, sizeof(scratch));
    vocab->decomposition_start = malloc((size_t)vocab->rank_limit * sizeof(uint32_t));
    vocab->decomposition = tki_table_alloc(((size_t)total_nodes + 1) * sizeof(tki_decomposition_node));
    if (lane_chain == NULL || lane_ranks == NULL ||
        vocab->decomposition_start == NULL || vocab->decomposition == NULL ||
        scratch_init(&scratch, vocab->longest_suffix_chain, vocab->max_token_bytes) != TKI_OK) {
        goto cleanup;
    }
    for (uint32_t rank = 0; rank < vocab->rank_limit; rank++) {
        vocab->decomposition_start[rank] = TKI_NONE;
    }
    status = TKI_OK;
    uint64_t used = 0;
    uint32_t next = 0; /* a state: the canonical tokens are the states' own tokens */
    while (status == TKI_OK && next < vocab->automaton_blocks) {
        /* The canonical tokens of the next states, up to CENTROID_LANES. */
        uint32_t lane_token[CENTROID_LANES], lane_at[CENTROID_LANES], lane_length[CENTROID_LANES];
        uint32_t lanes = 0;
        for (; next < vocab->automaton_blocks && lanes < CENTROID_LANES;
             next = tki_next_state(vocab, next)) {
            uint32_t token = tki_state_tau(vocab, next);
            if (token != TKI_NONE && vocab->rule[token].length == tki_state_depth(vocab, next)) {
                lane_token[lanes] = token;
                lane_at[lanes] = token;
                lane_length[lanes] = 0;
                lanes++;
            }
        }
        for (uint32_t walking = lanes; walking > 0;) {
            walking = 0;
            for (uint32_t l = 0; l < lanes; l++) {
                uint32_t y = lane_at[l];
                if (y == TKI_NONE) {
                    continue;
                }
                if (lane_length[l] == capacity) {
                    status = TKI_ERR_INTERNAL; /* longer than the longest chain */
                    break;
                }
                const tki_token_rule *rule = &vocab->rule[y];
                uint32_t suffix_parent = vocab->suffix_parent[y];
                lane_chain[l * capacity + lane_length[l]] =
                    (chain_link){suffix_parent, rule->valid_lo, rule->valid_hi, rule->length,
                                 rule->suc_length};
                lane_ranks[l * capacity + lane_length[l]] = y;
                lane_length[l]++;
                lane_at[l] = suffix_parent;
                walking += lane_at[l] != TKI_NONE;
            }
            if (status != TKI_OK) {
                break;
            }
        }
        for (uint32_t l = 0; l < lanes && status == TKI_OK; l++) {
            if (used + lane_length[l] > total_nodes) {
                status = TKI_ERR_INTERNAL;
                break;
            }
            vocab->decomposition_start[lane_token[l]] = (uint32_t)used;
            status = decompose_token(&scratch, lane_ranks + l * capacity, lane_chain + l * capacity,
                                     lane_length[l], vocab->decomposition + used);
            used += lane_length[l];
        }
    }
    if (status == TKI_OK && used != total_nodes) {
        status = TKI_ERR_INTERNAL;
    }
    vocab->decomposition_nodes = used;
cleanup:
    scratch_free(&scratch);
    free(lane_chain);
    free(lane_ranks);
    if (status != TKI_OK) {
        tki_centroid_free(vocab);
    }
    return status;
}
