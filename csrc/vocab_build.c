/*
 * vocab_build.c — from a vocabulary to the incremental algorithm's rules.
 *
 * For every token z of two or more bytes, tiktoken's own merge rule is run on
 * z's bytes (below; reference_bpe.c for long tokens).  If it ends as the
 * single part z, z is canonical, and the operands of its last merge are
 * pre(z) and suc(z).  z is improper when those merges ever went down in rank,
 * or when pre(z) or suc(z) is not canonical: the incremental step assumes
 * neither happens with priority = rank.  Nothing is asked of the single
 * bytes' own ranks: they never take part in merging.  A vocabulary with
 * improper tokens gets new rule priorities (properize.c) under which it does
 * hold, but for the tokens no priorities are known for (watched: a piece that
 * holds one takes the exact step, exact_step.c).
 *
 * Then the successor forest: parent(z) = suc(z), roots the 256 bytes,
 * numbered in pre-order with children in decreasing priority; each canonical
 * z gets its valid interval I(z) = [in(pre z), hi), hi being the in() of the
 * first child c of pre(z) with priority(c) <= priority(z), or out(pre z).
 *
 * The order of the build (tki_vocab_derive_tables): tokens in byte order
 * (token_order.c), classification, priorities (properize.c, if improper),
 * forest, automaton (automaton.c), the properization's check and watched
 * states (properize.c), centroid blocks (centroid.c).  This file also owns the
 * public build/free/info entry points and the status messages.
 */
#include <stdlib.h>
#include <string.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "internal.h"
#include "token_hash.h"

const char *tki_status_message(int32_t status) {
    switch (status) {
    case TKI_OK: return "ok";
    case TKI_ERR_NOMEM: return "out of memory";
    case TKI_ERR_ARGUMENT: return "invalid argument";
    case TKI_ERR_EMPTY_TOKEN: return "a mergeable token has no bytes";
    case TKI_ERR_TOKEN_TOO_LONG: return "a token is longer than the core supports (4096 bytes)";
    case TKI_ERR_DUPLICATE_BYTES: return "the same bytes are given two ranks";
    case TKI_ERR_DUPLICATE_RANK: return "two tokens share one rank";
    case TKI_ERR_MISSING_BYTE: return "a single byte has no rank, so some inputs cannot be encoded";
    case TKI_ERR_UNKNOWN_TOKEN: return "unknown token";
    case TKI_ERR_INTERNAL: return "internal invariant failed (a bug in tiktoken_inc; please report it)";
    case TKI_ERR_MALFORMED_LINE: return "a line of the rank file is not '<base64 token> <rank>'";
    case TKI_ERR_BAD_BASE64: return "a token's base64 in the rank file does not decode";
    case TKI_ERR_RANK_RANGE: return "a rank in the rank file is 2^32 - 1 or more";
    case TKI_ERR_NO_TOKENS: return "the rank file has no tokens";
    case TKI_ERR_NO_BYTE_TOKEN:
        return "the text holds a byte that this vocabulary cannot encode: no token covers it "
               "and the vocabulary has no rank for that single byte";
    case TKI_ERR_INVALID_UTF8: return "the bytes are not UTF-8";
    case TKI_ERR_REFUSED_SPECIAL: return "the text holds a disallowed special token";
    case TKI_ERR_BUSY: return "another thread is using this stream";
    case TKI_ERR_STREAM_FAILED: return "the stream failed earlier and takes no more input";
    default: return "unknown status";
    }
}

/*
 * Classifying a token runs tiktoken's merge loop on its bytes.  Up to
 * SCAN_MAX_BYTES this is tiktoken's own loop (scan the adjacent pairs for the
 * lowest rank, leftmost on a tie; merge; look up the two new pairs), which
 * beats a heap on short pieces; longer tokens use the heap BPE.  Lookups are
 * what costs: a pair of single bytes is read from a dense table, any other
 * pair from a small direct-mapped memo keyed by the two parts' ranks (the
 * tokens are taken in byte order, so neighbours ask for the same pairs), and
 * only then from the hash.  The hash is a cache miss, so SCAN_LANES tokens are
 * merged at once, round robin: a lane that needs the hash starts the loads
 * (tki_hash_locate) and yields, and reads them on its next turn.
 */
#define SCAN_MAX_BYTES 256u
#define SCAN_LANES 8u
#define PAIR_MEMO_BITS 16u

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define PREFETCH(address) ((void)(address))
#endif

/* What the merge loop did to one token. */
typedef struct merge_outcome {
    uint32_t parts;
    uint32_t last_left;     /* ranks of the operands of the last merge */
    uint32_t last_right;
    uint32_t descended;     /* some merge had a lower rank than the one before */
} merge_outcome;

/* One token's merge loop in progress. */
typedef struct scan_lane {
    uint32_t rank;                 /* the token; TKI_NONE: the lane is free        */
    uint32_t length;
    uint32_t set_up;               /* the parts below are initialized              */
    uint32_t parts;
    uint32_t merges;
    uint32_t previous;             /* rank of the last merge                       */
    const uint8_t *data;
    merge_outcome outcome;
    uint32_t waiting;              /* hash lookups in flight: 0, 1 or 2            */
    uint32_t wait_pair[2];         /* the pair each one gives the rank of          */
    uint64_t wait_key[2];          /* its memo key                                 */
    tki_hash_probe_state wait_where[2];
    uint32_t part_start[SCAN_MAX_BYTES + 1];
    uint32_t part_rank[SCAN_MAX_BYTES];
    uint32_t pair_rank[SCAN_MAX_BYTES]; /* rank of part i + part i+1, or TKI_NONE */
} scan_lane;

/* A memo slot: one cache line holds four. */
typedef struct pair_memo {
    uint64_t key;                       /* (left rank << 32 | right rank) + 1; 0: empty */
    uint32_t rank;                      /* of the two parts joined, or TKI_NONE */
    uint32_t unused;
} pair_memo;

typedef struct classify_scratch {
    uint32_t byte_rank[256];
    uint32_t *byte_pair;                /* 65536: rank of two bytes, or TKI_NONE   */
    pair_memo *memo;                    /* 2^PAIR_MEMO_BITS slots */
    scan_lane lanes[SCAN_LANES];
} classify_scratch;

static uint64_t memo_slot(uint64_t key) {
    return (key * 0x9e3779b97f4a7c15ull) >> (64 - PAIR_MEMO_BITS);
}

/*
 * The rank of parts pair and pair + 1 joined, into pair_rank[pair]: from the
 * memo when it knows, else a hash lookup is started and left waiting.
 */
static void ask_pair(const struct tki_vocab *vocab, classify_scratch *scratch, scan_lane *lane,
                     uint32_t pair) {
    uint64_t key = (((uint64_t)lane->part_rank[pair] << 32) | lane->part_rank[pair + 1]) + 1;
    uint64_t slot = memo_slot(key);
    if (scratch->memo[slot].key == key) {
        lane->pair_rank[pair] = scratch->memo[slot].rank;
        return;
    }
    uint32_t start = lane->part_start[pair];
    uint32_t waiting = lane->waiting++;
    lane->wait_pair[waiting] = pair;
    lane->wait_key[waiting] = key;
    lane->wait_where[waiting] = tki_hash_locate(vocab, lane->data + start,
                                                lane->part_start[pair + 2] - start, 0);
}

static void lane_set_up(classify_scratch *scratch, scan_lane *lane) {
    const uint8_t *data = lane->data;
    uint32_t length = lane->length;
    for (uint32_t i = 0; i < length; i++) {
        lane->part_start[i] = i;
        lane->part_rank[i] = scratch->byte_rank[data[i]];
    }
    lane->part_start[length] = length;
    for (uint32_t i = 0; i + 1 < length; i++) {
        lane->pair_rank[i] = scratch->byte_pair[((uint32_t)data[i] << 8) | data[i + 1]];
    }
    lane->parts = length;
    lane->merges = 0;
    lane->previous = 0;
    lane->waiting = 0;
    lane->outcome = (merge_outcome){length, TKI_NONE, TKI_NONE, 0};
    lane->set_up = 1;
}

/*
 * tiktoken's merge loop on the lane's token, until it waits for the hash
 * (returns 0) or is done (returns 1, lane->outcome filled).
 */
static int lane_run(const struct tki_vocab *vocab, classify_scratch *scratch, scan_lane *lane) {
    uint32_t *start = lane->part_start;
    uint32_t *part = lane->part_rank;
    uint32_t *pair = lane->pair_rank;
    for (uint32_t i = 0; i < lane->waiting; i++) {
        uint32_t at = lane->wait_pair[i];
        uint32_t rank = tki_hash_probe(vocab, lane->wait_where[i], lane->data + start[at],
                                       start[at + 2] - start[at]);
        uint64_t slot = memo_slot(lane->wait_key[i]);
        scratch->memo[slot] = (pair_memo){lane->wait_key[i], rank, 0};
        pair[at] = rank;
    }
    lane->waiting = 0;
    for (;;) {
        uint32_t parts = lane->parts;
        uint32_t best = TKI_NONE, at = 0;
        for (uint32_t i = 0; i + 1 < parts; i++) {
            if (pair[i] < best) {
                best = pair[i];
                at = i;
            }
        }
        if (best == TKI_NONE) {
            lane->outcome.parts = parts;
            return 1;
        }
        if (lane->merges > 0 && best < lane->previous) {
            lane->outcome.descended = 1;
        }
        lane->previous = best;
        lane->merges++;
        lane->outcome.last_left = part[at];
        lane->outcome.last_right = part[at + 1];
        /* Parts at and at + 1 become one, of rank `best`. */
        part[at] = best;
        for (uint32_t i = at + 1; i + 1 < parts; i++) {
            start[i] = start[i + 1];
            part[i] = part[i + 1];
            pair[i] = pair[i + 1];
        }
        parts--;
        start[parts] = lane->length;
        lane->parts = parts;
        pair[at] = TKI_NONE;
        if (at + 1 < parts) {
            ask_pair(vocab, scratch, lane, at);
        }
        if (at > 0) {
            ask_pair(vocab, scratch, lane, at - 1);
        }
        if (lane->waiting > 0) {
            return 0;
        }
    }
}

/* The same with the heap BPE, for long tokens. */
static int32_t heap_merges(const struct tki_vocab *vocab, tki_heap_workspace *work,
                           uint32_t *parts, const uint8_t *data, uint32_t length,
                           merge_outcome *outcome) {
    size_t count = 0;
    tki_merge_record record;
    int32_t status = tki_heap_bpe(vocab, work, data, length, parts, &count, &record);
    if (status != TKI_OK) {
        return status;
    }
    outcome->parts = (uint32_t)count;
    outcome->descended = record.ranks_descended;
    outcome->last_left = tki_lookup_rank(vocab, data, record.last_left_length);
    outcome->last_right =
        tki_lookup_rank(vocab, data + record.last_left_length, length - record.last_left_length);
    return TKI_OK;
}

/* Records what the merge loop did to `rank`. */
static void record_outcome(struct tki_vocab *vocab, uint32_t rank, const merge_outcome *outcome,
                           uint32_t *pre, uint32_t *suc) {
    if (outcome->parts != 1) {
        vocab->noncanonical_count++;
        if (vocab->token_length[rank] > vocab->longest_noncanonical) {
            vocab->longest_noncanonical = vocab->token_length[rank];
        }
        return;
    }
    vocab->rule_flags[rank] = TKI_FLAG_CANONICAL;
    pre[rank] = outcome->last_left;
    suc[rank] = outcome->last_right;
    if (outcome->descended) {
        vocab->rule_flags[rank] |= TKI_FLAG_IMPROPER;
    }
}

/* Canonical tokens, their pre/suc and properness, taking the tokens in `order`. */
static int32_t classify_tokens(struct tki_vocab *vocab, const tki_token_order *order,
                               uint32_t *pre, uint32_t *suc) {
    tki_heap_workspace work;
    memset(&work, 0, sizeof(work));
    classify_scratch *scratch = malloc(sizeof(classify_scratch));
    uint32_t *heap_parts = NULL;
    int32_t status = TKI_ERR_NOMEM;
    if (scratch == NULL) {
        return TKI_ERR_NOMEM;
    }
    scratch->byte_pair = malloc(65536 * sizeof(uint32_t));
    scratch->memo = calloc((size_t)1 << PAIR_MEMO_BITS, sizeof(pair_memo));
    if (scratch->byte_pair == NULL || scratch->memo == NULL) {
        goto cleanup;
    }
    if (vocab->max_token_bytes > SCAN_MAX_BYTES) {
        status = tki_heap_workspace_init(&work, vocab->max_token_bytes);
        if (status != TKI_OK) {
            goto cleanup;
        }
        status = TKI_ERR_NOMEM;
        heap_parts = malloc(((size_t)vocab->max_token_bytes + 1) * sizeof(uint32_t));
        if (heap_parts == NULL) {
            goto cleanup;
        }
    }
    for (uint32_t byte = 0; byte < 256; byte++) {
        uint8_t single = (uint8_t)byte;
        scratch->byte_rank[byte] = tki_lookup_rank(vocab, &single, 1);
    }
    for (uint32_t pair = 0; pair < 65536; pair++) {
        scratch->byte_pair[pair] = TKI_NONE;
    }
    for (uint32_t rank = 0; rank < vocab->rank_limit; rank++) {
        pre[rank] = suc[rank] = TKI_NONE;
        if (vocab->token_kind[rank] == TKI_KIND_MERGEABLE && vocab->token_length[rank] == 2) {
            const uint8_t *data = tki_token_data(vocab, rank);
            scratch->byte_pair[((uint32_t)data[0] << 8) | data[1]] = rank;
        }
    }
    for (uint32_t l = 0; l < SCAN_LANES; l++) {
        scratch->lanes[l].rank = TKI_NONE;
    }
    status = TKI_OK;
    uint32_t next = 0, busy = 0;
    while (status == TKI_OK && (next < order->count || busy > 0)) {
        for (uint32_t l = 0; l < SCAN_LANES && status == TKI_OK; l++) {
            scan_lane *lane = &scratch->lanes[l];
            if (lane->rank != TKI_NONE) {
                if (!lane->set_up) {
                    lane_set_up(scratch, lane);
                }
                if (lane_run(vocab, scratch, lane)) {
                    record_outcome(vocab, lane->rank, &lane->outcome, pre, suc);
                    lane->rank = TKI_NONE;
                    busy--;
                }
                continue;
            }
            /* A free lane takes the next token that needs the loop; it starts next turn. */
            while (next < order->count) {
                if (next + 2 * SCAN_LANES < order->count) {
                    uint32_t ahead = order->rank[next + 2 * SCAN_LANES];
                    PREFETCH(&vocab->token_offset[ahead]);
                    PREFETCH(&vocab->token_length[ahead]);
                }
                uint32_t rank = order->rank[next++];
                uint32_t length = vocab->token_length[rank];
                const uint8_t *data = tki_token_data(vocab, rank);
                if (length == 1) {
                    vocab->rule_flags[rank] = TKI_FLAG_CANONICAL;
                    continue;
                }
                if (length > SCAN_MAX_BYTES) {
                    merge_outcome outcome;
                    status = heap_merges(vocab, &work, heap_parts, data, length, &outcome);
                    if (status != TKI_OK) {
                        break;
                    }
                    record_outcome(vocab, rank, &outcome, pre, suc);
                    continue;
                }
                PREFETCH(data);
                lane->rank = rank;
                lane->length = length;
                lane->data = data;
                lane->set_up = 0;
                busy++;
                break;
            }
        }
    }
    /* pre and suc must themselves be canonical (tested once all are known). */
    for (uint32_t rank = 0; status == TKI_OK && rank < vocab->rank_limit; rank++) {
        if (pre[rank] == TKI_NONE) {
            continue;
        }
        if (!(vocab->rule_flags[pre[rank]] & TKI_FLAG_CANONICAL) ||
            !(vocab->rule_flags[suc[rank]] & TKI_FLAG_CANONICAL)) {
            vocab->rule_flags[rank] |= TKI_FLAG_IMPROPER;
        }
        if (vocab->rule_flags[rank] & TKI_FLAG_IMPROPER) {
            vocab->improper_count++;
        }
    }
cleanup:
    free(scratch->byte_pair);
    free(scratch->memo);
    free(scratch);
    free(heap_parts);
    tki_heap_workspace_free(&work);
    return status;
}

/*
 * Pre-order numbering of the successor forest and the valid intervals, the
 * rules ordered by `priority` (by rank, dense: 0 .. rules - 1), or by rank
 * where it is NULL.
 */
static int32_t number_forest(struct tki_vocab *vocab, const uint32_t *pre, const uint32_t *suc,
                             const uint32_t *priority) {
    int32_t status = TKI_ERR_NOMEM;
    uint32_t limit = vocab->rank_limit;
    uint32_t *child_start = calloc((size_t)limit + 1, sizeof(uint32_t));
    uint32_t *children = malloc((size_t)limit * sizeof(uint32_t));
    uint32_t *forest_out = calloc(limit, sizeof(uint32_t));
    uint32_t *stack = malloc(((size_t)limit + 1) * sizeof(uint32_t));
    uint32_t *stack_next = malloc(((size_t)limit + 1) * sizeof(uint32_t));
    if (child_start == NULL || children == NULL || forest_out == NULL || stack == NULL ||
        stack_next == NULL) {
        goto cleanup;
    }
    /* Children lists, each in decreasing priority (filled from the highest down). */
    uint32_t rules = 0;
    for (uint32_t rank = 0; rank < limit; rank++) {
        if (suc[rank] != TKI_NONE) {
            child_start[suc[rank] + 1]++;
            rules++;
        }
    }
    for (uint32_t rank = 0; rank < limit; rank++) {
        child_start[rank + 1] += child_start[rank];
    }
    {
        uint32_t *fill = stack; /* borrowed as a cursor array before the walk */
        uint32_t *by_priority = stack_next; /* borrowed: the rules by priority */
        memcpy(fill, child_start, (size_t)limit * sizeof(uint32_t));
        if (priority == NULL) {
            for (uint32_t rank = limit; rank-- > 0;) {
                if (suc[rank] != TKI_NONE) {
                    children[fill[suc[rank]]++] = rank;
                }
            }
        } else {
            for (uint32_t rank = 0; rank < limit; rank++) {
                if (suc[rank] != TKI_NONE) {
                    if (priority[rank] >= rules) {
                        status = TKI_ERR_INTERNAL;
                        goto cleanup;
                    }
                    by_priority[priority[rank]] = rank;
                }
            }
            for (uint32_t place = rules; place-- > 0;) {
                uint32_t rank = by_priority[place];
                children[fill[suc[rank]]++] = rank;
            }
        }
    }
    /* Iterative pre-order walk from each root (the single bytes, by rank). */
    uint32_t next_id = 1;
    for (uint32_t root = 0; root < limit; root++) {
        if (vocab->token_kind[root] != TKI_KIND_MERGEABLE || vocab->token_length[root] != 1) {
            continue;
        }
        uint32_t depth = 0;
        stack[0] = root;
        stack_next[0] = child_start[root];
        vocab->rule[root].forest_in = next_id++;
        depth = 1;
        while (depth > 0) {
            uint32_t node = stack[depth - 1];
            if (stack_next[depth - 1] < child_start[node + 1]) {
                uint32_t child = children[stack_next[depth - 1]++];
                vocab->rule[child].forest_in = next_id++;
                stack[depth] = child;
                stack_next[depth] = child_start[child];
                depth++;
            } else {
                forest_out[node] = next_id;
                depth--;
            }
        }
    }
    /* Valid intervals. */
    for (uint32_t rank = 0; rank < limit; rank++) {
        tki_token_rule *rule = &vocab->rule[rank];
        if (pre[rank] == TKI_NONE) {
            rule->valid_lo = 0;
            rule->valid_hi = UINT32_MAX;
            continue;
        }
        uint32_t parent = pre[rank];
        /* children[child_start[parent] ..) is in decreasing priority: find the first <= rank's. */
        uint32_t lo = child_start[parent], hi = child_start[parent + 1];
        uint32_t own = priority == NULL ? rank : priority[rank];
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if ((priority == NULL ? children[mid] : priority[children[mid]]) > own) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        rule->valid_lo = vocab->rule[parent].forest_in;
        rule->valid_hi = lo < child_start[parent + 1] ? vocab->rule[children[lo]].forest_in
                                                      : forest_out[parent];
    }
    status = TKI_OK;
cleanup:
    free(child_start);
    free(children);
    free(forest_out);
    free(stack);
    free(stack_next);
    return status;
}

/*
 * What the build keeps of the rules until the automaton exists: an improper
 * vocabulary's properization (its priority NULL for a proper one, whose
 * ranks are the priorities) is finished against the automaton.
 */
typedef struct rule_build {
    uint32_t *pre;              /* by rank: pre(z), TKI_NONE for no rule */
    uint32_t *suc;
    tki_properization properization;
} rule_build;

static void rule_build_free(rule_build *build) {
    free(build->pre);
    free(build->suc);
    build->pre = build->suc = NULL;
    tki_properization_free(&build->properization);
}

/* Classification, new priorities if the vocabulary is improper, the forest.  *build is filled. */
static int32_t build_rules(struct tki_vocab *vocab, const tki_token_order *order, rule_build *build) {
    int32_t status = TKI_ERR_NOMEM;
    uint32_t limit = vocab->rank_limit;
    uint32_t *pre = build->pre = malloc((size_t)limit * sizeof(uint32_t));
    uint32_t *suc = build->suc = malloc((size_t)limit * sizeof(uint32_t));
    vocab->rule_flags = calloc(limit, 1);
    vocab->rule = calloc(limit, sizeof(tki_token_rule));
    if (pre == NULL || suc == NULL || vocab->rule_flags == NULL || vocab->rule == NULL) {
        return status;
    }
    status = classify_tokens(vocab, order, pre, suc);
    if (status == TKI_OK && vocab->improper_count > 0) {
        status = tki_properize(vocab, pre, suc, &build->properization);
    }
    if (status != TKI_OK) {
        return status;
    }
    for (uint32_t rank = 0; rank < limit; rank++) {
        if (vocab->rule_flags[rank] & TKI_FLAG_CANONICAL) {
            vocab->rule[rank].length = (uint16_t)vocab->token_length[rank];
            vocab->rule[rank].suc_length =
                suc[rank] == TKI_NONE ? 0 : (uint16_t)vocab->token_length[suc[rank]];
        }
    }
    return number_forest(vocab, pre, suc, build->properization.priority);
}

int32_t tki_vocab_build(const uint8_t *token_bytes, const uint64_t *token_offsets,
                        const uint32_t *token_ranks, uint32_t token_count,
                        const uint8_t *special_bytes, const uint64_t *special_offsets,
                        const uint32_t *special_ranks, uint32_t special_count,
                        tki_vocab **out_vocab, uint32_t *error_index) {
    uint32_t unused_index = 0;
    if (error_index == NULL) {
        error_index = &unused_index;
    }
    *error_index = UINT32_MAX;
    if (out_vocab == NULL) {
        return TKI_ERR_ARGUMENT;
    }
    *out_vocab = NULL;
    struct tki_vocab *vocab = calloc(1, sizeof(*vocab));
    if (vocab == NULL) {
        return TKI_ERR_NOMEM;
    }
    int32_t status = tki_token_table_build(vocab, token_bytes, token_offsets, token_ranks,
                                           token_count, special_bytes, special_offsets,
                                           special_ranks, special_count, error_index);
    if (status == TKI_OK) {
        status = tki_vocab_derive_tables(vocab);
    }
    if (status != TKI_OK) {
        tki_vocab_free(vocab);
        return status;
    }
    *out_vocab = vocab;
    return TKI_OK;
}

/*
 * Hands the heap's free memory back to the system (glibc; elsewhere nothing).
 * The automaton's build frees some megabytes of scratch just before the
 * centroid blocks are allocated; glibc keeps such freed blocks (its mmap
 * threshold grows with the first large free) resident, so without this the
 * build's peak holds both.
 */
static void release_free_memory(void) {
#if defined(__GLIBC__)
    (void)malloc_trim(0);
#endif
}

/*
 * Whether the incremental algorithm can take the vocabulary at all: it needs
 * every single byte (the roots of the successor forest) and tokens of at most
 * TKI_MAX_TOKEN_BYTES (16-bit lengths).  tiktoken builds the others too; they
 * get empty rules and the heap BPE.
 */
static int incremental_possible(const struct tki_vocab *vocab) {
    if (vocab->max_token_bytes > TKI_MAX_TOKEN_BYTES) {
        return 0;
    }
    for (uint32_t byte = 0; byte < 256; byte++) {
        uint8_t single = (uint8_t)byte;
        if (tki_lookup_rank(vocab, &single, 1) == TKI_NONE) {
            return 0;
        }
    }
    return 1;
}

int32_t tki_vocab_derive_tables(struct tki_vocab *vocab) {
    if (!incremental_possible(vocab)) {
        vocab->incremental = 0;
        vocab->rule_flags = calloc(vocab->rank_limit, 1);
        vocab->rule = calloc(vocab->rank_limit, sizeof(tki_token_rule));
        return vocab->rule_flags == NULL || vocab->rule == NULL ? TKI_ERR_NOMEM : TKI_OK;
    }
    tki_token_order order = {0, NULL, NULL};
    rule_build rules;
    memset(&rules, 0, sizeof(rules));
    int32_t status = tki_token_order_build(vocab, &order);
    if (status == TKI_OK) {
        status = build_rules(vocab, &order, &rules);
    }
    if (status == TKI_OK) {
        if (rules.properization.priority == NULL) {
            rule_build_free(&rules); /* before the automaton: a smaller peak */
        }
        uint64_t suffix_chain_nodes = 0;
        status = tki_automaton_build(vocab, &order, &suffix_chain_nodes);
        tki_token_order_free(&order); /* before the centroid blocks: a smaller peak */
        if (status == TKI_OK && rules.properization.priority != NULL) {
            status = tki_properize_finish(vocab, &rules.properization, rules.pre);
        }
        rule_build_free(&rules);
        release_free_memory();
        if (status == TKI_OK) {
            status = tki_centroid_build(vocab, suffix_chain_nodes);
        }
        vocab->incremental = status == TKI_OK;
        if (status == TKI_AUTOMATON_TOO_LARGE) {
            status = TKI_OK; /* exact all the same, with the heap BPE */
        }
    }
    tki_token_order_free(&order);
    rule_build_free(&rules);
    if (status == TKI_OK && !vocab->incremental) {
        /* The heap BPE needs only the token table: drop what will not be used. */
        tki_automaton_free(vocab);
        tki_centroid_free(vocab);
        for (uint32_t rank = 0; rank < vocab->rank_limit; rank++) {
            vocab->rule_flags[rank] &= (uint8_t)(TKI_FLAG_CANONICAL | TKI_FLAG_IMPROPER);
        }
        vocab->watched_count = vocab->properization_rejects = 0; /* nothing is stepped */
    }
    return status;
}

void tki_vocab_free(tki_vocab *vocab) {
    if (vocab == NULL) {
        return;
    }
    tki_memo_pool_free(vocab);
    if (vocab->borrowed) {
        tki_specials_free(vocab);
        free(vocab); /* the other tables belong to the image */
        return;
    }
    tki_token_table_free(vocab);
    tki_automaton_free(vocab);
    tki_centroid_free(vocab);
    free(vocab->rule_flags);
    free(vocab->rule);
    free(vocab);
}

void tki_vocab_get_info(const tki_vocab *vocab, tki_vocab_info *out_info) {
    if (vocab == NULL || out_info == NULL) {
        return;
    }
    memset(out_info, 0, sizeof(*out_info));
    uint64_t pool = 0;
    for (uint32_t rank = 0; rank < vocab->rank_limit; rank++) {
        pool += vocab->token_length[rank];
    }
    uint64_t limit = vocab->rank_limit;
    out_info->token_count = vocab->token_count;
    out_info->special_count = vocab->special_count;
    out_info->max_rank = tki_id_of_rank(vocab, vocab->rank_limit - 1); /* the last rank is a token */
    out_info->sparse_ids = vocab->sparse_ids;
    if (vocab->special_count > 0 && vocab->special_id[vocab->special_count - 1] > out_info->max_rank) {
        out_info->max_rank = vocab->special_id[vocab->special_count - 1];
    }
    out_info->max_token_bytes = vocab->max_token_bytes;
    out_info->noncanonical_count = vocab->noncanonical_count;
    out_info->improper_count = vocab->improper_count;
    out_info->incremental = vocab->incremental;
    out_info->automaton_states = vocab->incremental ? vocab->state_count : 0;
    out_info->automaton_tiles = vocab->incremental ? vocab->automaton_blocks - vocab->state_count : 0;
    out_info->longest_suffix_chain = vocab->longest_suffix_chain;
    out_info->decomposition_nodes = vocab->decomposition_nodes;
    out_info->moved_rules = vocab->moved_count;
    out_info->watched_tokens = vocab->watched_count;
    out_info->properization_rejects = vocab->properization_rejects;
    out_info->memory_bytes =
        pool + limit * (sizeof(uint64_t) + sizeof(uint32_t) + 2 + sizeof(tki_token_rule)) +
        (vocab->hash_mask + 1) * sizeof(tki_hash_slot);
    if (vocab->sparse_ids) {
        out_info->memory_bytes += limit * sizeof(uint32_t);
    }
    if (vocab->special_count > 0) {
        out_info->memory_bytes += vocab->special_offset[vocab->special_count] +
                                  (uint64_t)vocab->special_count * (sizeof(uint32_t) + sizeof(uint64_t));
    }
    if (vocab->incremental) {
        out_info->memory_bytes +=
            (uint64_t)vocab->automaton_blocks * (TKI_TILE_WIDTH * sizeof(uint32_t) + sizeof(uint16_t)) +
            limit * 2 * sizeof(uint32_t) +
            vocab->decomposition_nodes * sizeof(tki_decomposition_node);
    }
}
