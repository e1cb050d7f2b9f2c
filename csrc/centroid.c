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
 * u, then the up part), which is what the binary search reads.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct part_task {
    uint32_t start;     /* a chain index inside the part        */
    uint32_t position;  /* where its decomposition node goes    */
} part_task;

typedef struct centroid_scratch {
    uint32_t *chain;          /* chain index -> rank                    */
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
}

static int32_t scratch_init(centroid_scratch *s, uint32_t chain_capacity, uint32_t max_bytes) {
    size_t n = (size_t)chain_capacity + 1;
    memset(s, 0, sizeof(*s));
    s->chain = malloc(n * sizeof(uint32_t));
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
    if (s->chain == NULL || s->index_of_length == NULL || s->tree_parent == NULL ||
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

/* Builds the block of one token x into nodes[0 .. chain length). */
static int32_t decompose_token(const struct tki_vocab *vocab, centroid_scratch *s, uint32_t x,
                               tki_decomposition_node *nodes, uint32_t *out_length) {
    uint32_t length = 0;
    for (uint32_t y = x; y != TKI_NONE; y = vocab->suffix_parent[y]) {
        s->chain[length] = y;
        s->index_of_length[vocab->token_length[y]] = length;
        length++;
    }
    int32_t status = TKI_OK;
    for (uint32_t i = 0; i < length; i++) {
        const tki_token_rule *rule = &vocab->rule[s->chain[i]];
        s->tree_parent[i] = TKI_NONE;
        if (rule->suc_length > 0) {
            s->tree_parent[i] = s->index_of_length[rule->suc_length];
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
            uint32_t key = vocab->rule[s->chain[v]].valid_lo;
            uint32_t at = below++;
            while (at > 0 && vocab->rule[s->chain[s->entry_nodes[at - 1]]].valid_lo > key) {
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
            entry->key_lo = vocab->rule[s->chain[v]].valid_lo;
            entry->key_hi = vocab->rule[s->chain[v]].valid_hi;
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
        s->index_of_length[vocab->token_length[s->chain[i]]] = TKI_NONE;
    }
    *out_length = length;
    return status;
}

void tki_centroid_free(struct tki_vocab *vocab) {
    free(vocab->decomposition_start);
    free(vocab->decomposition);
    vocab->decomposition_start = NULL;
    vocab->decomposition = NULL;
    vocab->decomposition_nodes = 0;
}

int32_t tki_centroid_build(struct tki_vocab *vocab) {
    uint64_t total = 0;
    for (uint32_t rank = 0; rank < vocab->rank_limit; rank++) {
        if (vocab->rule_flags[rank] & TKI_FLAG_CANONICAL) {
            for (uint32_t y = rank; y != TKI_NONE; y = vocab->suffix_parent[y]) {
                total++;
            }
        }
    }
    if (total >= UINT32_MAX) {
        return TKI_ERR_ARGUMENT;
    }
    centroid_scratch scratch;
    int32_t status = scratch_init(&scratch, vocab->longest_suffix_chain, vocab->max_token_bytes);
    if (status != TKI_OK) {
        return status;
    }
    vocab->decomposition_start = malloc((size_t)vocab->rank_limit * sizeof(uint32_t));
    vocab->decomposition = tki_table_alloc(((size_t)total + 1) * sizeof(tki_decomposition_node));
    if (vocab->decomposition_start == NULL || vocab->decomposition == NULL) {
        status = TKI_ERR_NOMEM;
    }
    uint32_t used = 0;
    for (uint32_t rank = 0; status == TKI_OK && rank < vocab->rank_limit; rank++) {
        vocab->decomposition_start[rank] = TKI_NONE;
        if (!(vocab->rule_flags[rank] & TKI_FLAG_CANONICAL)) {
            continue;
        }
        uint32_t length = 0;
        vocab->decomposition_start[rank] = used;
        status = decompose_token(vocab, &scratch, rank, vocab->decomposition + used, &length);
        used += length;
    }
    scratch_free(&scratch);
    if (status != TKI_OK) {
        tki_centroid_free(vocab);
        return status;
    }
    vocab->decomposition_nodes = used;
    return TKI_OK;
}
