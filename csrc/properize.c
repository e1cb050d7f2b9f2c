/*
 * properize.c — rule priorities under which the incremental step gives
 * tiktoken's ids for a vocabulary that is not proper, and the tokens it
 * cannot vouch for (watched: their pieces take the exact step, exact_step.c).
 *
 * tiktoken merges dynamically: the adjacent pair of lowest rank first (the
 * leftmost on a tie), whatever merged before.  The incremental step merges by
 * a priority per rule and assumes every token, tokenized alone, merges in
 * increasing priority with its own merge last (docs/algorithm.md section 2).
 * With priority = rank that fails in open models' vocabularies: in Qwen 3.6's,
 * 人力 (rank 108583) merges before 人力资源 (99655), which then fires at once.
 *
 * Levels.  The level of a canonical token z is the highest rank among the
 * merges that make it: level(z) = max(rank z, level(pre z), level(suc z)),
 * bytes below every rank.  tiktoken merges in order of level (a part of level
 * L cannot wait for one of a higher level: the merge of higher rank would find
 * a pair of lower rank still open), and within level L as follows.  The token
 * of rank L (the seed) merges at its pairs, left to right; after each, the
 * part just made grows at once by the merges of rank below L that it enables
 * (the members of level L, the lowest rank first), before the next seed pair.
 * A member's parts are one of level L, which it grows from (its parent in the
 * level's growing tree), and one made before level L (absorbed on the left or
 * on the right).  The incremental step's priorities order the levels as
 * tiktoken does; within a level they must make "every seed pair, then the
 * members one rule at a time" come out as tiktoken's order does.  They do
 * when
 *   (a) no member joins two parts of its own level (two grown seed pairs);
 *   (b) no member absorbs the seed's left part on the right (it would take it
 *       from the next seed pair, which tiktoken has not merged yet: Qwen
 *       3.6's いっぱい grows from いっぱ so, and "いっぱいっぱ" splits apart);
 * and the members are ordered so that
 *   (c) a parent comes before its children;
 *   (d) of two children of one part that grow on different sides, the one of
 *       lower rank comes first (the one tiktoken picks);
 *   (e) a member that absorbs a part w on the right comes before every member
 *       of the level that absorbs w on the left (the pair on the left grew
 *       first, and took w).
 * Why that suffices: both orders start level L from the same parts; by (b)
 * the same seed pairs merge (tiktoken's growth never takes a part of a later
 * seed pair, and overlapping pairs, of a seed "aa", resolve leftmost in both).
 * By (a) grown pairs never merge with each other, so a grown pair changes
 * only by taking the parts next to it, and two neighbours compete only for
 * the parts between them.  One pair alone grows the same way in both orders
 * by (c) and (d); where neighbours compete, tiktoken lets the left one finish
 * first, and (e) lets it take what it takes first here too.  So level L ends
 * with the same parts, and by induction every text does.  Under these
 * priorities every token then merges in increasing priority with its own
 * merge last (levels never go down along a token's merges, and within a
 * level a part comes before the member it grows into), so the incremental
 * step's own premise holds and it gives tiktoken's ids.  Small improper
 * vocabularies checked against tiktoken exhaustively (tests/) catch any of
 * (a)-(e) left out.
 *
 * The order is a topological sort (ties by rank) of (c)-(e) per level, each
 * family of edges through shared virtual nodes (a member's edges are O(1)).
 * A level where (a) or (b) fails or the edges close a cycle cannot be
 * ordered: its members keep their ranks and are watched.  No text without a
 * watched token depends on such a level (its members are the only tokens
 * whose merges the step could misplace, and a text holds every token it
 * merges into), so the incremental step stays exact on those texts; a text
 * that holds one takes the exact step from there on (exact_step.c).
 *
 * After the automaton is built (tki_properize_finish), every canonical token
 * that holds a member is tokenized alone under the new priorities, and must
 * merge into itself with its own last merge, in increasing priority (a check
 * of the argument above; a token that fails is watched with its level).  Then
 * the watched flags go to the automaton's rows: a state is watched when a
 * watched token is a suffix of its string (word 11 of the row).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum { GROWS_LEFT = 1, GROWS_RIGHT = 2, GROWS_JOIN = 3 };

/* One member of a level: a canonical token whose level is above its rank. */
typedef struct level_member {
    uint32_t token;
    uint32_t level;     /* the seed's rank + 1 (levels are kept as rank + 1; bytes 0) */
    uint32_t parent;    /* its part of the same level: the seed or another member */
    uint32_t absorbed;  /* its other part, made before the level                   */
    uint32_t grows;     /* GROWS_*: which side the parent grows to                 */
    uint32_t place;     /* its place in the order (TKI_NONE: not placed)           */
} level_member;

/* Scratch of the sorts: members by index, ordered by one of these keys. */
typedef struct member_sort {
    const level_member *members;
    int by;             /* SORT_BY_* */
} member_sort;

enum { SORT_BY_LEVEL = 0, SORT_BY_PARENT = 1, SORT_BY_ABSORBED = 2, SORT_BY_PLACE = 3 };

static int member_before(const member_sort *sort, uint32_t a, uint32_t b) {
    const level_member *x = &sort->members[a], *y = &sort->members[b];
    switch (sort->by) {
    case SORT_BY_PARENT:
        if (x->parent != y->parent) {
            return x->parent < y->parent;
        }
        return x->token < y->token;
    case SORT_BY_ABSORBED:
        if (x->level != y->level) {
            return x->level < y->level;
        }
        if (x->absorbed != y->absorbed) {
            return x->absorbed < y->absorbed;
        }
        return x->grows < y->grows;
    case SORT_BY_PLACE:
        if (x->level != y->level) {
            return x->level < y->level;
        }
        return x->place < y->place;
    default:
        if (x->level != y->level) {
            return x->level < y->level;
        }
        return x->token < y->token;
    }
}

/* Bottom-up merge sort of index[0..count) (scratch holds count entries). */
static void sort_members(const member_sort *sort, uint32_t *index, uint32_t *scratch, uint32_t count) {
    for (uint32_t width = 1; width < count; width *= 2) {
        for (uint32_t start = 0; start < count; start += 2 * width) {
            uint32_t middle = start + width < count ? start + width : count;
            uint32_t end = start + 2 * width < count ? start + 2 * width : count;
            uint32_t i = start, j = middle, k = start;
            while (i < middle && j < end) {
                scratch[k++] = member_before(sort, index[j], index[i]) ? index[j++] : index[i++];
            }
            while (i < middle) {
                scratch[k++] = index[i++];
            }
            while (j < end) {
                scratch[k++] = index[j++];
            }
        }
        memcpy(index, scratch, (size_t)count * sizeof(uint32_t));
    }
}

/* The order constraints: nodes are the members, then virtual nodes; edges from -> to. */
typedef struct order_graph {
    uint32_t node_count;
    uint32_t *node_level;   /* by node */
    uint32_t *node_token;   /* by node: the member's token, TKI_NONE for a virtual node */
    uint32_t edge_count;
    uint32_t *edge_from;
    uint32_t *edge_to;
} order_graph;

static uint32_t add_virtual(order_graph *graph, uint32_t level) {
    uint32_t node = graph->node_count++;
    graph->node_level[node] = level;
    graph->node_token[node] = TKI_NONE;
    return node;
}

static void add_edge(order_graph *graph, uint32_t from, uint32_t to) {
    graph->edge_from[graph->edge_count] = from;
    graph->edge_to[graph->edge_count] = to;
    graph->edge_count++;
}

/*
 * Edges from every member of index[from_start..from_end) to a new virtual
 * node, and from it to every member of index[to_start..to_end).
 */
static void add_through_virtual(order_graph *graph, const uint32_t *index, uint32_t from_start,
                                uint32_t from_end, uint32_t to_start, uint32_t to_end,
                                uint32_t level) {
    uint32_t node = add_virtual(graph, level);
    for (uint32_t i = from_start; i < from_end; i++) {
        add_edge(graph, index[i], node);
    }
    for (uint32_t i = to_start; i < to_end; i++) {
        add_edge(graph, node, index[i]);
    }
}

/* A binary min-heap of (key, node) for the topological sort. */
typedef struct ready_node {
    uint64_t key;   /* level << 32 | (token + 1), 0 for a virtual node: those go first */
    uint32_t node;
} ready_node;

static void ready_push(ready_node *heap, uint32_t *size, ready_node item) {
    uint32_t at = (*size)++;
    while (at > 0 && heap[(at - 1) / 2].key > item.key) {
        heap[at] = heap[(at - 1) / 2];
        at = (at - 1) / 2;
    }
    heap[at] = item;
}

static ready_node ready_pop(ready_node *heap, uint32_t *size) {
    ready_node top = heap[0], item = heap[--*size];
    uint32_t at = 0;
    for (;;) {
        uint32_t child = 2 * at + 1;
        if (child >= *size) {
            break;
        }
        if (child + 1 < *size && heap[child + 1].key < heap[child].key) {
            child++;
        }
        if (heap[child].key >= item.key) {
            break;
        }
        heap[at] = heap[child];
        at = child;
    }
    heap[at] = item;
    return top;
}

static uint64_t ready_key(const order_graph *graph, uint32_t node) {
    uint32_t token = graph->node_token[node];
    return (uint64_t)graph->node_level[node] << 32 | (token == TKI_NONE ? 0 : (uint64_t)token + 1);
}

/*
 * Kahn's topological sort of the graph, the lowest key first among the nodes
 * ready: members[i].place gets each member's place; members on a cycle (or
 * after one) keep TKI_NONE.  TKI_ERR_NOMEM leaves the places unset.
 */
static int32_t place_members(const order_graph *graph, level_member *members) {
    int32_t status = TKI_ERR_NOMEM;
    uint32_t nodes = graph->node_count, edges = graph->edge_count;
    uint32_t *edge_start = calloc((size_t)nodes + 1, sizeof(uint32_t));
    uint32_t *edge_target = malloc(((size_t)edges + 1) * sizeof(uint32_t));
    uint32_t *in_degree = calloc((size_t)nodes + 1, sizeof(uint32_t));
    ready_node *heap = malloc(((size_t)nodes + 1) * sizeof(ready_node));
    if (edge_start == NULL || edge_target == NULL || in_degree == NULL || heap == NULL) {
        goto cleanup;
    }
    for (uint32_t e = 0; e < edges; e++) {
        edge_start[graph->edge_from[e] + 1]++;
        in_degree[graph->edge_to[e]]++;
    }
    for (uint32_t node = 0; node < nodes; node++) {
        edge_start[node + 1] += edge_start[node];
    }
    {
        uint32_t *cursor = malloc(((size_t)nodes + 1) * sizeof(uint32_t));
        if (cursor == NULL) {
            goto cleanup;
        }
        memcpy(cursor, edge_start, (size_t)nodes * sizeof(uint32_t));
        for (uint32_t e = 0; e < edges; e++) {
            edge_target[cursor[graph->edge_from[e]]++] = graph->edge_to[e];
        }
        free(cursor);
    }
    uint32_t size = 0, placed = 0;
    for (uint32_t node = 0; node < nodes; node++) {
        if (in_degree[node] == 0) {
            ready_push(heap, &size, (ready_node){ready_key(graph, node), node});
        }
    }
    while (size > 0) {
        uint32_t node = ready_pop(heap, &size).node;
        if (graph->node_token[node] != TKI_NONE) {
            members[node].place = placed++; /* members are nodes 0 .. count - 1 */
        }
        for (uint32_t e = edge_start[node]; e < edge_start[node + 1]; e++) {
            uint32_t next = edge_target[e];
            if (--in_degree[next] == 0) {
                ready_push(heap, &size, (ready_node){ready_key(graph, next), next});
            }
        }
    }
    status = TKI_OK;
cleanup:
    free(edge_start);
    free(edge_target);
    free(in_degree);
    free(heap);
    return status;
}

/* The rules (canonical tokens of two or more bytes), shortest first: *out, *out_count. */
static int32_t rules_by_length(const struct tki_vocab *vocab, const uint32_t *pre, uint32_t **out,
                               uint32_t *out_count) {
    uint32_t limit = vocab->rank_limit, longest = vocab->max_token_bytes;
    uint32_t *length_start = calloc((size_t)longest + 2, sizeof(uint32_t));
    uint32_t count = 0;
    *out = NULL;
    *out_count = 0;
    if (length_start == NULL) {
        return TKI_ERR_NOMEM;
    }
    for (uint32_t rank = 0; rank < limit; rank++) {
        if (pre[rank] != TKI_NONE) {
            length_start[vocab->token_length[rank] + 1]++;
            count++;
        }
    }
    for (uint32_t length = 0; length <= longest; length++) {
        length_start[length + 1] += length_start[length];
    }
    uint32_t *rules = malloc(((size_t)count + 1) * sizeof(uint32_t));
    if (rules == NULL) {
        free(length_start);
        return TKI_ERR_NOMEM;
    }
    for (uint32_t rank = 0; rank < limit; rank++) {
        if (pre[rank] != TKI_NONE) {
            rules[length_start[vocab->token_length[rank]]++] = rank;
        }
    }
    free(length_start);
    *out = rules;
    *out_count = count;
    return TKI_OK;
}

void tki_properization_free(tki_properization *properization) {
    free(properization->priority);
    free(properization->level);
    properization->priority = NULL;
    properization->level = NULL;
}

int32_t tki_properize(struct tki_vocab *vocab, const uint32_t *pre, const uint32_t *suc,
                      tki_properization *out) {
    const uint32_t limit = vocab->rank_limit;
    int32_t status = TKI_ERR_NOMEM;
    uint32_t *rules = NULL, *member_of = NULL, *index = NULL, *scratch = NULL;
    uint8_t *unverified = NULL;
    level_member *members = NULL;
    order_graph graph;
    memset(&graph, 0, sizeof(graph));
    out->priority = NULL;
    out->level = NULL;
    uint32_t rule_count = 0;
    uint32_t *level = calloc(limit, sizeof(uint32_t));
    if (level == NULL) {
        goto cleanup;
    }
    status = rules_by_length(vocab, pre, &rules, &rule_count);
    if (status != TKI_OK) {
        goto cleanup;
    }
    status = TKI_ERR_NOMEM;
    /* Levels (as rank + 1; a byte's 0), shortest rule first: its parts come before it. */
    uint32_t count = 0;
    for (uint32_t k = 0; k < rule_count; k++) {
        uint32_t z = rules[k];
        uint32_t late = z + 1;
        late = level[pre[z]] > late ? level[pre[z]] : late;
        late = level[suc[z]] > late ? level[suc[z]] : late;
        level[z] = late;
        count += late > z + 1;
    }
    /* The members, sorted by level then rank; their side and parent. */
    members = malloc(((size_t)count + 1) * sizeof(level_member));
    member_of = malloc((size_t)limit * sizeof(uint32_t));
    index = malloc(((size_t)count + 1) * sizeof(uint32_t));
    scratch = malloc(((size_t)count + 1) * sizeof(uint32_t));
    unverified = calloc((size_t)count + 1, 1);
    /* Nodes: the members and at most two virtual nodes each; edges: five each at most. */
    graph.node_level = malloc(((size_t)count * 3 + 1) * sizeof(uint32_t));
    graph.node_token = malloc(((size_t)count * 3 + 1) * sizeof(uint32_t));
    graph.edge_from = malloc(((size_t)count * 5 + 1) * sizeof(uint32_t));
    graph.edge_to = malloc(((size_t)count * 5 + 1) * sizeof(uint32_t));
    if (members == NULL || member_of == NULL || index == NULL || scratch == NULL || unverified == NULL ||
        graph.node_level == NULL || graph.node_token == NULL || graph.edge_from == NULL ||
        graph.edge_to == NULL) {
        goto cleanup;
    }
    {
        uint32_t m = 0;
        for (uint32_t z = 0; z < limit; z++) {
            if (pre[z] == TKI_NONE || level[z] <= z + 1) {
                continue;
            }
            level_member *member = &members[m];
            uint32_t late = level[z], left = level[pre[z]], right = level[suc[z]];
            member->token = z;
            member->level = late;
            member->place = TKI_NONE;
            if (left == late && right == late) {
                member->grows = GROWS_JOIN;
                member->parent = suc[z];
                member->absorbed = pre[z];
            } else if (right == late) {
                member->grows = GROWS_LEFT;
                member->parent = suc[z];
                member->absorbed = pre[z];
            } else {
                member->grows = GROWS_RIGHT;
                member->parent = pre[z];
                member->absorbed = suc[z];
            }
            index[m] = m;
            m++;
        }
    }
    member_sort sort = {members, SORT_BY_LEVEL};
    sort_members(&sort, index, scratch, count);
    {
        /* Members renumbered in (level, rank) order: node i is members[i]. */
        level_member *sorted = malloc(((size_t)count + 1) * sizeof(level_member));
        if (sorted == NULL) {
            goto cleanup;
        }
        for (uint32_t i = 0; i < count; i++) {
            sorted[i] = members[index[i]];
        }
        free(members);
        members = sorted;
        sort.members = members;
    }
    for (uint32_t z = 0; z < limit; z++) {
        member_of[z] = TKI_NONE;
    }
    for (uint32_t i = 0; i < count; i++) {
        member_of[members[i].token] = i;
        graph.node_level[i] = members[i].level;
        graph.node_token[i] = members[i].token;
        index[i] = i;
    }
    graph.node_count = count;
    /* (a) and (b), per member; the seed of level L is the token of rank L - 1. */
    for (uint32_t i = 0; i < count; i++) {
        const level_member *member = &members[i];
        uint32_t seed = member->level - 1;
        if (member->grows == GROWS_JOIN ||
            (member->grows == GROWS_RIGHT && member->absorbed == pre[seed])) {
            unverified[i] = 1;
        }
    }
    /* (c) parent before child, where the parent is a member (the seed comes first anyway). */
    for (uint32_t i = 0; i < count; i++) {
        uint32_t parent = member_of[members[i].parent];
        if (parent != TKI_NONE) {
            add_edge(&graph, parent, i);
        }
    }
    /* (d) the children of one part by rank, where the side changes: runs of one side in turn. */
    sort.by = SORT_BY_PARENT;
    sort_members(&sort, index, scratch, count);
    for (uint32_t start = 0; start < count;) {
        uint32_t end = start;
        while (end < count && members[index[end]].parent == members[index[start]].parent) {
            end++;
        }
        uint32_t run = start;
        while (run < end) {
            uint32_t next = run;
            while (next < end && members[index[next]].grows == members[index[run]].grows) {
                next++;
            }
            uint32_t after = next;
            while (after < end && members[index[after]].grows == members[index[next]].grows) {
                after++;
            }
            if (next < end) {
                add_through_virtual(&graph, index, run, next, next, after, members[index[run]].level);
            }
            run = next;
        }
        start = end;
    }
    /* (e) right before left, per absorbed part of a level. */
    sort.by = SORT_BY_ABSORBED;
    sort_members(&sort, index, scratch, count);
    for (uint32_t start = 0; start < count;) {
        uint32_t end = start, lefts = start, rights = start;
        const level_member *first = &members[index[start]];
        while (end < count && members[index[end]].level == first->level &&
               members[index[end]].absorbed == first->absorbed) {
            end++;
        }
        /* Sorted by side within: GROWS_LEFT, then GROWS_RIGHT, then GROWS_JOIN. */
        while (rights < end && members[index[rights]].grows == GROWS_LEFT) {
            rights++;
        }
        uint32_t rights_end = rights;
        while (rights_end < end && members[index[rights_end]].grows == GROWS_RIGHT) {
            rights_end++;
        }
        if (rights > lefts && rights_end > rights) {
            add_through_virtual(&graph, index, rights, rights_end, lefts, rights, first->level);
        }
        start = end;
    }
    status = place_members(&graph, members);
    if (status != TKI_OK) {
        goto cleanup;
    }
    status = TKI_ERR_NOMEM;
    /* A level is verified when every member passed (a) and (b) and was placed. */
    for (uint32_t start = 0; start < count;) {
        uint32_t end = start;
        int bad = 0;
        while (end < count && members[end].level == members[start].level) {
            bad |= unverified[end] || members[end].place == TKI_NONE;
            end++;
        }
        for (uint32_t i = start; i < end; i++) {
            unverified[i] = (uint8_t)bad;
        }
        start = end;
    }
    /* The priorities: a rule that is no member keeps its place among the ranks; after a
     * seed, the members of its level (placed, or by rank where the level is not verified). */
    for (uint32_t i = 0; i < count; i++) {
        members[i].place = unverified[i] ? members[i].token : members[i].place;
        index[i] = i;
    }
    sort.by = SORT_BY_PLACE;
    sort_members(&sort, index, scratch, count);
    uint32_t *priority = malloc((size_t)limit * sizeof(uint32_t));
    if (priority == NULL) {
        goto cleanup;
    }
    vocab->moved_count = count;
    vocab->watched_count = 0;
    uint32_t next = 0, member = 0;
    for (uint32_t z = 0; z < limit; z++) {
        if (pre[z] == TKI_NONE) {
            priority[z] = TKI_NONE;
            continue;
        }
        if (member_of[z] != TKI_NONE) {
            continue; /* placed after its seed */
        }
        priority[z] = next++;
        for (; member < count && members[index[member]].level == z + 1; member++) {
            uint32_t i = index[member];
            priority[members[i].token] = next++;
            if (unverified[i]) {
                vocab->rule_flags[members[i].token] |= TKI_FLAG_WATCHED;
                vocab->watched_count++;
            }
        }
    }
    if (member != count || next != rule_count) {
        free(priority);
        status = TKI_ERR_INTERNAL;
        goto cleanup;
    }
    out->priority = priority;
    out->level = level;
    level = NULL;
    status = TKI_OK;
cleanup:
    free(level);
    free(rules);
    free(members);
    free(member_of);
    free(index);
    free(scratch);
    free(unverified);
    free(graph.node_level);
    free(graph.node_token);
    free(graph.edge_from);
    free(graph.edge_to);
    return status;
}

/*
 * Whether token z, tokenized alone with the rules merged by `priority`,
 * merges into itself through priorities that never go down, its last merge
 * joining pre(z) and suc(z).
 */
static int32_t merges_as_itself(const struct tki_vocab *vocab, const uint32_t *priority,
                                tki_heap_workspace *work, uint32_t *parts, uint32_t z,
                                uint32_t pre_length, int *out_ok) {
    size_t count = 0;
    tki_merge_record record;
    int32_t status = tki_heap_bpe_with_priorities(vocab, work, priority, tki_token_data(vocab, z),
                                                  vocab->token_length[z], parts, &count, &record);
    *out_ok = status == TKI_OK && count == 1 && parts[0] == z && !record.ranks_descended &&
              record.last_left_length == pre_length;
    return status;
}

/* Watches z and every member of z's level (after a failed check). */
static void watch_level_of(struct tki_vocab *vocab, const tki_properization *properization, uint32_t z) {
    uint32_t late = properization->level[z];
    for (uint32_t rank = 0; rank < vocab->rank_limit; rank++) {
        int member = properization->level[rank] == late && late > rank + 1;
        if ((member || rank == z) && !(vocab->rule_flags[rank] & TKI_FLAG_WATCHED)) {
            vocab->rule_flags[rank] |= TKI_FLAG_WATCHED;
            vocab->watched_count++;
        }
    }
}

int32_t tki_properize_finish(struct tki_vocab *vocab, const tki_properization *properization,
                             const uint32_t *pre) {
    const uint32_t limit = vocab->rank_limit;
    const uint32_t *level = properization->level;
    int32_t status = TKI_ERR_NOMEM;
    uint32_t *rules = NULL, rule_count = 0;
    tki_heap_workspace work;
    memset(&work, 0, sizeof(work));
    uint8_t *ends_with = calloc(limit, 1);
    uint32_t *parts = malloc(((size_t)vocab->max_token_bytes + 1) * sizeof(uint32_t));
    if (ends_with == NULL || parts == NULL) {
        goto cleanup;
    }
    status = rules_by_length(vocab, pre, &rules, &rule_count);
    if (status == TKI_OK) {
        status = tki_heap_workspace_init(&work, vocab->max_token_bytes);
    }
    if (status != TKI_OK) {
        goto cleanup;
    }
    /*
     * ends_with[z]: bit 0, some canonical suffix of z is a member; bit 1, one is
     * watched (the suffix chain, shortest first).
     */
    for (uint32_t k = 0; k < rule_count; k++) {
        uint32_t z = rules[k], parent = vocab->suffix_parent[z];
        ends_with[z] = (uint8_t)((level[z] > z + 1) | ((vocab->rule_flags[z] & TKI_FLAG_WATCHED) ? 2 : 0) |
                                 (parent != TKI_NONE ? ends_with[parent] : 0));
    }
    /*
     * The check, on every rule whose bytes hold a member (a member ends where
     * some suffix does) and no watched token (a text that holds it is watched).
     */
    for (uint32_t k = 0; k < rule_count; k++) {
        uint32_t z = rules[k];
        const uint8_t *data = tki_token_data(vocab, z);
        uint32_t state = 0, holds = 0;
        for (uint32_t i = 0; i < vocab->token_length[z]; i++) {
            state = tki_automaton_next(vocab, state, data[i]);
            holds |= ends_with[tki_state_tau(vocab, state)];
        }
        if (holds != 1) {
            continue;
        }
        int ok = 0;
        status = merges_as_itself(vocab, properization->priority, &work, parts, z,
                                  vocab->token_length[pre[z]], &ok);
        if (status != TKI_OK) {
            goto cleanup;
        }
        if (!ok) {
            vocab->properization_rejects++;
            watch_level_of(vocab, properization, z);
        }
    }
    /* A token is watched at its suffix chain when one of its canonical suffixes is watched. */
    for (uint32_t k = 0; k < rule_count; k++) {
        uint32_t z = rules[k], parent = vocab->suffix_parent[z];
        if ((vocab->rule_flags[z] & TKI_FLAG_WATCHED) ||
            (parent != TKI_NONE && (vocab->rule_flags[parent] & TKI_FLAG_WATCHED_SUFFIX))) {
            vocab->rule_flags[z] |= TKI_FLAG_WATCHED_SUFFIX;
        }
    }
    /* The rows: a state is watched when its tau is (tau holds every canonical suffix of the state). */
    for (uint32_t state = 0; state < vocab->automaton_blocks; state = tki_next_state(vocab, state)) {
        uint32_t tau = tki_state_tau(vocab, state);
        if (tau != TKI_NONE && (vocab->rule_flags[tau] & TKI_FLAG_WATCHED_SUFFIX)) {
            vocab->automaton[(size_t)state * TKI_TILE_WIDTH + 11] |= 1u << TKI_TILE_ID_BITS;
        }
    }
    status = TKI_OK;
cleanup:
    free(ends_with);
    free(parts);
    free(rules);
    tki_heap_workspace_free(&work);
    return status;
}
