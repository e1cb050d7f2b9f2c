/*
 * step.h — the per-byte decision of incremental BPE, shared (inlined) by the
 * one-shot encoder (encode.c) and the stream (stream.c).
 *
 * For text s of length m, theta(m), the last token of BPE(s), is the longest
 * canonical suffix z of s that is locally valid: z is atomic, or
 *     valid_lo(z) <= last(m - |suc z|) < valid_hi(z),
 * last(i) being the forest id of theta(i) (0 for the empty prefix).  Callers
 * index `last_forest_id` relative to their own window: entry `length` is
 * last(m), and entries down to length - t (t the longest token) must exist.
 */
#ifndef TIKTOKEN_INC_STEP_H
#define TIKTOKEN_INC_STEP_H

#include "internal.h"

static inline int locally_valid(const struct tki_vocab *vocab, uint32_t token,
                                const uint32_t *last_forest_id, size_t length) {
    const tki_token_rule *rule = &vocab->rule[token];
    if (rule->suc_length == 0) {
        return 1;
    }
    uint32_t w = last_forest_id[length - rule->suc_length];
    return rule->valid_lo <= w && w < rule->valid_hi;
}

static inline uint32_t linear_scan(const struct tki_vocab *vocab, uint32_t z,
                            const uint32_t *last_forest_id, size_t length) {
    for (uint32_t y = z; y != TKI_NONE; y = vocab->suffix_parent[y]) {
        if (locally_valid(vocab, y, last_forest_id, length)) {
            return y;
        }
    }
    return TKI_NONE;
}

static inline uint32_t centroid_search(const struct tki_vocab *vocab, uint32_t z,
                                const uint32_t *last_forest_id, size_t length) {
    const tki_decomposition_node *block = vocab->decomposition + vocab->decomposition_start[z];
    const tki_decomposition_node *node = block;
    for (;;) {
        uint32_t u = node->token;
        uint32_t below = TKI_ENTRY_COUNT(node);
        const tki_decomposition_node *entries = block + node->first_entry;
        if (!locally_valid(vocab, u, last_forest_id, length)) {
            if (!TKI_HAS_UP(node)) {
                return TKI_NONE; /* theta must lie above u: the tables are inconsistent */
            }
            node = entries + below;
            continue;
        }
        if (below == 0) {
            return u;
        }
        uint32_t w = last_forest_id[length - vocab->rule[u].length];
        /* The last entry with key_lo <= w. */
        uint32_t lo = 0, hi = below;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (entries[mid].key_lo <= w) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if (lo == 0 || w >= entries[lo - 1].key_hi) {
            return u;
        }
        node = entries + lo - 1;
    }
}

/*
 * theta when z is not locally valid: z's suffix parent (`parent`, which the
 * caller has from z's state's row) when that is valid (most of these steps
 * on real text: it is the next suffix the scan would try, and testing it
 * costs one rule, where the centroid search's first loads depend on one
 * another); else the centroid search, whose O(log^2 t) bound the one test
 * leaves as it is.  With TKI_METHOD_LINEAR the linear scan from z itself,
 * which thereby stays the oracle for both.  Never inlined, so that the fast
 * path around it stays small in the stepping loops (inlined, it made them
 * ~5% slower).
 */
static TKI_NOINLINE uint32_t tki_step_search(const struct tki_vocab *vocab, uint32_t z,
                                             uint32_t parent, const uint32_t *last_forest_id,
                                             size_t length, uint32_t flags) {
    if (flags & TKI_METHOD_LINEAR) {
        return linear_scan(vocab, z, last_forest_id, length);
    }
    if (parent != TKI_NONE && locally_valid(vocab, parent, last_forest_id, length)) {
        return parent;
    }
    return centroid_search(vocab, z, last_forest_id, length);
}

/*
 * theta for the text that ends with longest canonical suffix z = tau(state):
 * z itself on the fast path (z spans the whole text, or is locally valid),
 * else tki_step_search, with z's suffix parent from the state's row.
 * TKI_NONE if the tables are inconsistent (a bug; callers report
 * TKI_ERR_INTERNAL).
 */
static TKI_ALWAYS_INLINE uint32_t tki_step_theta(const struct tki_vocab *vocab, uint32_t z,
                                                 uint32_t state, const uint32_t *last_forest_id,
                                                 size_t length, uint64_t text_length,
                                                 uint32_t flags) {
    if (vocab->rule[z].length == text_length || locally_valid(vocab, z, last_forest_id, length)) {
        return z;
    }
    return tki_step_search(vocab, z, tki_state_tau_parent(vocab, state), last_forest_id, length,
                           flags);
}

#endif /* TIKTOKEN_INC_STEP_H */
