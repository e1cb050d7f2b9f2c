/*
 * token_table.c — the vocabulary as given: token bytes by rank, the
 * bytes -> rank hash, the ranks' ids (internal.h: dense ids are the ranks,
 * sparse ones are renumbered), and decoding.
 *
 * Everything else is derived from these tables, so this file is also where
 * a vocabulary is refused: an empty mergeable token, the same bytes twice, a
 * rank used twice (tiktoken cannot decode such a vocabulary either).  A
 * vocabulary without some single byte, or with a token longer than
 * TKI_MAX_TOKEN_BYTES, is built as tiktoken builds it, and encoded with the
 * heap BPE alone (vocab_build.c); a text with a byte that no token covers
 * is refused when it is encoded (TKI_ERR_NO_BYTE_TOKEN).  The hash is open addressing with linear probing over
 * a power-of-two table at most half full; a slot keeps the rank, the length
 * and the first eight bytes, so short keys are compared in the slot itself
 * (the encoder looks up every regex piece: this is on the hot path).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "token_hash.h"

uint32_t tki_lookup_rank(const struct tki_vocab *vocab, const uint8_t *data, size_t len) {
    if (len == 0 || len > vocab->max_token_bytes) {
        return TKI_NONE;
    }
    return tki_hash_probe(vocab, tki_hash_locate(vocab, data, len, 0), data, len);
}

void tki_token_table_free(struct tki_vocab *vocab) {
    free(vocab->pool);
    free(vocab->token_offset);
    free(vocab->token_length);
    free(vocab->token_kind);
    free(vocab->hash_slots);
    free(vocab->token_id);
    vocab->pool = NULL;
    vocab->token_offset = NULL;
    vocab->token_length = NULL;
    vocab->token_kind = NULL;
    vocab->hash_slots = NULL;
    vocab->token_id = NULL;
    tki_specials_free(vocab);
}

void tki_specials_free(struct tki_vocab *vocab) {
    free(vocab->special_id);
    free(vocab->special_offset);
    free(vocab->special_pool);
    vocab->special_id = NULL;
    vocab->special_offset = NULL;
    vocab->special_pool = NULL;
    vocab->special_count = 0;
}

/* Copies the mergeable tokens into the pool; token i has rank ranks[i]. */
static int32_t place_tokens(struct tki_vocab *vocab, const uint8_t *bytes,
                            const uint64_t *offsets, const uint32_t *ranks, uint32_t count,
                            uint32_t *error_index) {
    uint64_t pool_used = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint64_t start = offsets[i];
        uint64_t length = offsets[i + 1] - offsets[i];
        uint32_t rank = ranks[i];
        *error_index = i;
        if (length == 0) {
            return TKI_ERR_EMPTY_TOKEN;
        }
        if (length > UINT32_MAX) {
            return TKI_ERR_TOKEN_TOO_LONG;
        }
        if (vocab->token_kind[rank] != TKI_KIND_ABSENT) {
            return TKI_ERR_DUPLICATE_RANK;
        }
        vocab->token_kind[rank] = TKI_KIND_MERGEABLE;
        vocab->token_offset[rank] = pool_used;
        vocab->token_length[rank] = (uint32_t)length;
        memcpy(vocab->pool + pool_used, bytes + start, (size_t)length);
        pool_used += length;
        if (length > vocab->max_token_bytes) {
            vocab->max_token_bytes = (uint32_t)length;
        }
    }
    return TKI_OK;
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/*
 * The special tokens, apart from the mergeable ones (internal.h): by id, in
 * their own pool.  Refused as the build refuses them, the first in input
 * order that is wrong named by *error_index (index_base + its index): offsets
 * that go down or a TKI_NONE id (TKI_ERR_ARGUMENT), more than 2^32 - 1 bytes
 * (TKI_ERR_TOKEN_TOO_LONG), the id of a mergeable token or of an earlier
 * special token (TKI_ERR_DUPLICATE_RANK).  On failure the vocabulary has no
 * special tokens.
 */
static int32_t place_specials(struct tki_vocab *vocab, const uint8_t *bytes,
                              const uint64_t *offsets, const uint32_t *ids, uint32_t count,
                              uint32_t index_base, uint32_t *error_index) {
    if (count == 0) {
        return TKI_OK;
    }
    if (bytes == NULL || offsets == NULL || ids == NULL) {
        return TKI_ERR_ARGUMENT;
    }
    uint64_t *order = malloc((size_t)count * sizeof(uint64_t)); /* id << 32 | index, sorted */
    vocab->special_id = malloc((size_t)count * sizeof(uint32_t));
    vocab->special_offset = malloc(((size_t)count + 1) * sizeof(uint64_t));
    int32_t status = TKI_ERR_NOMEM;
    uint32_t wrong = UINT32_MAX;
    if (order == NULL || vocab->special_id == NULL || vocab->special_offset == NULL) {
        goto done;
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < count && wrong == UINT32_MAX; i++) {
        uint32_t id = ids[i];
        if (offsets[i + 1] < offsets[i] || id == TKI_NONE) {
            status = TKI_ERR_ARGUMENT;
            wrong = i;
        } else if (offsets[i + 1] - offsets[i] > UINT32_MAX) {
            status = TKI_ERR_TOKEN_TOO_LONG;
            wrong = i;
        } else if (tki_rank_of_id(vocab, id) != TKI_NONE) {
            status = TKI_ERR_DUPLICATE_RANK;
            wrong = i;
        }
        total += offsets[i + 1] - offsets[i];
        order[i] = (uint64_t)id << 32 | i;
    }
    if (wrong == UINT32_MAX) {
        qsort(order, count, sizeof(uint64_t), compare_u64);
        for (uint32_t k = 1; k < count; k++) {
            /* The later of two with one id (order holds the earlier first). */
            uint32_t later = (uint32_t)order[k];
            if (order[k] >> 32 == order[k - 1] >> 32 && later < wrong) {
                status = TKI_ERR_DUPLICATE_RANK;
                wrong = later;
            }
        }
    }
    if (wrong != UINT32_MAX) {
        *error_index = index_base + wrong;
        goto done;
    }
    vocab->special_pool = malloc((size_t)total + 1);
    if (vocab->special_pool == NULL) {
        goto done;
    }
    vocab->special_offset[0] = 0;
    for (uint32_t k = 0; k < count; k++) {
        uint32_t i = (uint32_t)order[k];
        uint64_t length = offsets[i + 1] - offsets[i];
        vocab->special_id[k] = ids[i];
        if (length > 0) {
            memcpy(vocab->special_pool + vocab->special_offset[k], bytes + offsets[i], (size_t)length);
        }
        vocab->special_offset[k + 1] = vocab->special_offset[k] + length;
    }
    vocab->special_count = count;
    status = TKI_OK;
done:
    free(order);
    if (status != TKI_OK) {
        tki_specials_free(vocab);
    }
    return status;
}

int32_t tki_vocab_set_specials(tki_vocab *vocab, const uint8_t *special_bytes,
                               const uint64_t *special_offsets, const uint32_t *special_ranks,
                               uint32_t special_count, uint32_t *error_index) {
    uint32_t unused_index = 0;
    if (error_index == NULL) {
        error_index = &unused_index;
    }
    *error_index = UINT32_MAX;
    if (vocab == NULL || vocab->special_count > 0) {
        return TKI_ERR_ARGUMENT;
    }
    return place_specials(vocab, special_bytes, special_offsets, special_ranks, special_count, 0,
                          error_index);
}

/* The hash over the `count` tokens placed, token i at rank ranks[i]. */
static int32_t build_hash(struct tki_vocab *vocab, const uint32_t *ranks, uint32_t count,
                          uint32_t *error_index) {
    uint64_t capacity = 16;
    while (capacity < (uint64_t)count * 2) {
        capacity *= 2;
    }
    vocab->hash_slots = tki_table_alloc((size_t)capacity * sizeof(tki_hash_slot));
    if (vocab->hash_slots == NULL) {
        return TKI_ERR_NOMEM;
    }
    for (uint64_t slot = 0; slot < capacity; slot++) {
        vocab->hash_slots[slot] = (tki_hash_slot){0, TKI_NONE, 0};
    }
    vocab->hash_mask = capacity - 1;
    /*
     * One probe per token finds its empty slot or the same bytes (a
     * duplicate).  The slots are cache misses: each token's slot is located
     * (and prefetched) INSERT_AHEAD tokens before it is probed.
     */
    enum { INSERT_AHEAD = 16 };
    tki_hash_probe_state ahead[INSERT_AHEAD];
    for (uint32_t i = 0; i < count && i < INSERT_AHEAD; i++) {
        uint32_t rank = ranks[i];
        ahead[i] = tki_hash_locate(vocab, tki_token_data(vocab, rank), vocab->token_length[rank], 0);
    }
    for (uint32_t i = 0; i < count; i++) {
        uint32_t rank = ranks[i];
        const uint8_t *data = tki_token_data(vocab, rank);
        uint32_t len = vocab->token_length[rank];
        tki_hash_probe_state where = ahead[i % INSERT_AHEAD];
        if (i + INSERT_AHEAD < count) {
            uint32_t later = ranks[i + INSERT_AHEAD];
            ahead[i % INSERT_AHEAD] =
                tki_hash_locate(vocab, tki_token_data(vocab, later), vocab->token_length[later], 0);
        }
        uint64_t slot = where.slot;
        for (;; slot = (slot + 1) & vocab->hash_mask) {
            const tki_hash_slot *entry = &vocab->hash_slots[slot];
            if (entry->rank == TKI_NONE) {
                break;
            }
            if (tki_hash_slot_holds(vocab, entry, where, data, len)) {
                *error_index = i;
                return TKI_ERR_DUPLICATE_BYTES;
            }
        }
        vocab->hash_slots[slot] = (tki_hash_slot){where.head, rank, where.middle};
    }
    return TKI_OK;
}

/*
 * Ids are the ranks themselves while the per-rank tables that makes stay
 * within a small factor of the tokens' own: the largest id below twice the
 * number of tokens, plus some slack for small vocabularies (tiktoken's own
 * have a few holes at most, such as p50k_base's 50256).
 */
#define DENSE_IDS_PER_TOKEN 2u
#define DENSE_IDS_SLACK 4096u

static int ids_are_dense(uint32_t max_id, uint32_t token_count) {
    return (uint64_t)max_id < (uint64_t)token_count * DENSE_IDS_PER_TOKEN + DENSE_IDS_SLACK;
}

/*
 * Sparse ids: each token's rank is the place of its id among the distinct
 * ids, so ranks keep the ids' order (token i: rank (*out_ranks)[i], which the
 * caller frees).  Sets rank_limit (the distinct ids) and token_id.  Tokens
 * that share an id share a rank; place_tokens then names the later one.
 */
static int32_t renumber_ids(struct tki_vocab *vocab, const uint32_t *ids, uint32_t count,
                            uint32_t **out_ranks) {
    int32_t status = TKI_ERR_NOMEM;
    uint64_t *order = malloc(((size_t)count + 1) * sizeof(uint64_t)); /* id << 32 | index, sorted */
    uint32_t *ranks = malloc(((size_t)count + 1) * sizeof(uint32_t));
    vocab->token_id = malloc(((size_t)count + 1) * sizeof(uint32_t));
    if (order == NULL || ranks == NULL || vocab->token_id == NULL) {
        goto done;
    }
    for (uint32_t i = 0; i < count; i++) {
        order[i] = (uint64_t)ids[i] << 32 | i;
    }
    qsort(order, count, sizeof(uint64_t), compare_u64);
    uint32_t distinct = 0;
    for (uint32_t k = 0; k < count; k++) {
        uint32_t id = (uint32_t)(order[k] >> 32);
        if (distinct == 0 || vocab->token_id[distinct - 1] != id) {
            vocab->token_id[distinct++] = id;
        }
        ranks[(uint32_t)order[k]] = distinct - 1;
    }
    vocab->rank_limit = distinct;
    vocab->sparse_ids = 1;
    *out_ranks = ranks;
    ranks = NULL;
    status = TKI_OK;
done:
    free(order);
    free(ranks);
    return status;
}

void tki_renumber_ranks(const struct tki_vocab *vocab, uint32_t *ids, size_t count) {
    const uint32_t *token_id = vocab->token_id;
    for (size_t i = 0; i < count; i++) {
        ids[i] = ids[i] == TKI_NONE ? TKI_NONE : token_id[ids[i]];
    }
}

/* The index of `value` in ascending values[0..count) (count < TKI_NONE), or TKI_NONE. */
static uint32_t find_ascending(const uint32_t *values, uint32_t count, uint32_t value) {
    uint32_t lo = 0, hi = count; /* the first >= value */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (values[mid] < value) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < count && values[lo] == value ? lo : TKI_NONE;
}

uint32_t tki_rank_of_id(const struct tki_vocab *vocab, uint32_t id) {
    if (!vocab->sparse_ids) {
        return id < vocab->rank_limit && vocab->token_kind[id] == TKI_KIND_MERGEABLE ? id : TKI_NONE;
    }
    return find_ascending(vocab->token_id, vocab->rank_limit, id);
}

int32_t tki_token_table_build(struct tki_vocab *vocab, const uint8_t *token_bytes,
                              const uint64_t *token_offsets, const uint32_t *token_ranks,
                              uint32_t token_count, const uint8_t *special_bytes,
                              const uint64_t *special_offsets, const uint32_t *special_ranks,
                              uint32_t special_count, uint32_t *error_index) {
    if (token_offsets == NULL || token_ranks == NULL || (token_count > 0 && token_bytes == NULL) ||
        (special_count > 0 && (special_bytes == NULL || special_offsets == NULL ||
                               special_ranks == NULL))) {
        return TKI_ERR_ARGUMENT;
    }
    if ((uint64_t)token_count + special_count > UINT32_MAX - 1) {
        return TKI_ERR_ARGUMENT;
    }
    /* Offsets must never go down: the pool is sized from the first and last. */
    for (uint32_t i = 0; i < token_count; i++) {
        if (token_offsets[i + 1] < token_offsets[i]) {
            *error_index = i;
            return TKI_ERR_ARGUMENT;
        }
    }
    for (uint32_t i = 0; i < special_count; i++) {
        if (special_offsets[i + 1] < special_offsets[i]) {
            *error_index = token_count + i;
            return TKI_ERR_ARGUMENT;
        }
    }
    uint32_t max_rank = 0;
    for (uint32_t i = 0; i < token_count; i++) {
        if (token_ranks[i] == TKI_NONE) {
            *error_index = i;
            return TKI_ERR_ARGUMENT;
        }
        max_rank = token_ranks[i] > max_rank ? token_ranks[i] : max_rank;
    }
    for (uint32_t i = 0; i < special_count; i++) {
        if (special_ranks[i] == TKI_NONE) {
            *error_index = token_count + i;
            return TKI_ERR_ARGUMENT;
        }
    }
    uint64_t pool_size = token_offsets[token_count] - token_offsets[0];
    vocab->token_count = token_count;
    /* The ranks: the ids themselves, or the ids renumbered (internal.h). */
    const uint32_t *ranks = token_ranks;
    uint32_t *renumbered = NULL;
    if (ids_are_dense(max_rank, token_count)) {
        vocab->rank_limit = max_rank + 1; /* the mergeable tokens': the specials are apart */
    } else {
        int32_t status = renumber_ids(vocab, token_ranks, token_count, &renumbered);
        if (status != TKI_OK) {
            return status;
        }
        ranks = renumbered;
    }
    vocab->pool = malloc((size_t)pool_size + 1);
    vocab->token_offset = calloc(vocab->rank_limit, sizeof(uint64_t));
    vocab->token_length = calloc(vocab->rank_limit, sizeof(uint32_t));
    vocab->token_kind = calloc(vocab->rank_limit, sizeof(uint8_t));
    int32_t status = TKI_ERR_NOMEM;
    if (vocab->pool != NULL && vocab->token_offset != NULL && vocab->token_length != NULL &&
        vocab->token_kind != NULL) {
        status = place_tokens(vocab, token_bytes, token_offsets, ranks, token_count, error_index);
    }
    if (status == TKI_OK) {
        status = place_specials(vocab, special_bytes, special_offsets, special_ranks,
                                special_count, token_count, error_index);
    }
    if (status == TKI_OK) {
        status = build_hash(vocab, ranks, token_count, error_index);
    }
    free(renumbered);
    return status;
}

int32_t tki_token_rank(const tki_vocab *vocab, const uint8_t *bytes, size_t len,
                       uint32_t *out_rank) {
    if (vocab == NULL || out_rank == NULL || (bytes == NULL && len > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    uint32_t rank = tki_lookup_rank(vocab, bytes, len);
    if (rank == TKI_NONE) {
        return TKI_ERR_UNKNOWN_TOKEN;
    }
    *out_rank = tki_id_of_rank(vocab, rank);
    return TKI_OK;
}

/*
 * The bytes of an id: a mergeable token's, else a special token's (found by
 * binary search: decoding a special id is rare).  0 for an id with neither.
 * Where ids are ranks, a mergeable token's id is read in place.
 */
static inline int bytes_of(const struct tki_vocab *vocab, uint32_t id, const uint8_t **out_bytes,
                           uint64_t *out_len) {
    uint32_t rank = id;
    if (vocab->sparse_ids) {
        rank = tki_rank_of_id(vocab, id);
    }
    if (rank < vocab->rank_limit && vocab->token_kind[rank] == TKI_KIND_MERGEABLE) {
        *out_bytes = tki_token_data(vocab, rank);
        *out_len = vocab->token_length[rank];
        return 1;
    }
    uint32_t special = find_ascending(vocab->special_id, vocab->special_count, id);
    if (special == TKI_NONE) {
        return 0;
    }
    *out_bytes = vocab->special_pool + vocab->special_offset[special];
    *out_len = vocab->special_offset[special + 1] - vocab->special_offset[special];
    return 1;
}

int32_t tki_token_bytes(const tki_vocab *vocab, uint32_t rank, const uint8_t **out_bytes,
                        size_t *out_len) {
    if (vocab == NULL || out_bytes == NULL || out_len == NULL) {
        return TKI_ERR_ARGUMENT;
    }
    uint64_t length = 0;
    if (!bytes_of(vocab, rank, out_bytes, &length)) {
        return TKI_ERR_UNKNOWN_TOKEN;
    }
    *out_len = (size_t)length;
    return TKI_OK;
}

int32_t tki_decoded_length(const tki_vocab *vocab, const uint32_t *tokens, size_t count,
                           size_t *out_len, size_t *bad_index) {
    if (vocab == NULL || out_len == NULL || bad_index == NULL || (tokens == NULL && count > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    size_t total = 0;
    for (size_t i = 0; i < count; i++) {
        const uint8_t *bytes = NULL;
        uint64_t length = 0;
        if (!bytes_of(vocab, tokens[i], &bytes, &length)) {
            *bad_index = i;
            return TKI_ERR_UNKNOWN_TOKEN;
        }
        if (length > SIZE_MAX - total) {
            return TKI_ERR_NOMEM;
        }
        total += (size_t)length;
    }
    *out_len = total;
    return TKI_OK;
}

int32_t tki_decode(const tki_vocab *vocab, const uint32_t *tokens, size_t count, uint8_t *out,
                   size_t out_capacity, size_t *out_len, size_t *bad_index) {
    if (vocab == NULL || out_len == NULL || bad_index == NULL || (tokens == NULL && count > 0) ||
        (out == NULL && out_capacity > 0)) {
        return TKI_ERR_ARGUMENT;
    }
    size_t used = 0;
    for (size_t i = 0; i < count; i++) {
        const uint8_t *bytes = NULL;
        uint64_t length = 0;
        if (!bytes_of(vocab, tokens[i], &bytes, &length)) {
            *bad_index = i;
            return TKI_ERR_UNKNOWN_TOKEN;
        }
        if (length > out_capacity - used) {
            return TKI_ERR_ARGUMENT;
        }
        if (length > 0) {
            memcpy(out + used, bytes, (size_t)length);
        }
        used += (size_t)length;
    }
    *out_len = used;
    return TKI_OK;
}

int32_t tki_vocab_list_ids(const tki_vocab *vocab, uint32_t *out_ids, uint32_t *out_lengths,
                           size_t capacity, size_t *out_count) {
    if (vocab == NULL || out_count == NULL ||
        (capacity > 0 && (out_ids == NULL || out_lengths == NULL)) ||
        capacity < (uint64_t)vocab->token_count + vocab->special_count) {
        return TKI_ERR_ARGUMENT;
    }
    size_t count = 0;
    for (uint32_t rank = 0; rank < vocab->rank_limit; rank++) {
        if (vocab->token_kind[rank] == TKI_KIND_MERGEABLE) {
            out_ids[count] = tki_id_of_rank(vocab, rank);
            out_lengths[count++] = vocab->token_length[rank];
        }
    }
    for (uint32_t k = 0; k < vocab->special_count; k++) {
        out_ids[count] = vocab->special_id[k];
        out_lengths[count++] = (uint32_t)(vocab->special_offset[k + 1] - vocab->special_offset[k]);
    }
    *out_count = count;
    return TKI_OK;
}
