/*
 * token_order.c — the mergeable tokens in byte order, and how many leading
 * bytes each shares with the one before it.
 *
 * Two parts of the build walk the vocabulary in this order.  automaton.c
 * makes the trie from it: a token adds states only past its common prefix
 * with the previous one, and states come out numbered breadth-first with the
 * children of a state contiguous, with no hash of edges and no renumbering.
 * vocab_build.c classifies tokens in it: neighbours share their first
 * merges, so the pairs it looks up are the ones it looked up just before.
 *
 * Order: bytewise, a token before every longer token it is a prefix of.
 * Sort: each token's first eight bytes as a big-endian word (zero-padded) are
 * its key; a least-significant-digit radix sort orders the keys (a byte
 * position where all keys agree is skipped), and the few runs of equal keys
 * are finished by comparing lengths and the bytes past the eighth.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct sort_record {
    uint64_t key;     /* first min(8, length) bytes, big-endian, zero-padded */
    uint32_t rank;
    uint32_t length;
} sort_record;

/* Order of two records with equal keys (the key holds all of a token of up to 8 bytes). */
static int record_before(const struct tki_vocab *vocab, const sort_record *a,
                         const sort_record *b) {
    if (a->length > 8 && b->length > 8) {
        uint32_t shorter = a->length < b->length ? a->length : b->length;
        int order = memcmp(tki_token_data(vocab, a->rank) + 8, tki_token_data(vocab, b->rank) + 8,
                           shorter - 8);
        if (order != 0) {
            return order < 0;
        }
    }
    return a->length < b->length;
}

/* Sorts records[0..count) (equal keys) with record_before; scratch holds count records. */
static void sort_equal_keys(const struct tki_vocab *vocab, sort_record *records, uint32_t count,
                            sort_record *scratch) {
    /* Insertion sort of blocks of 16, then bottom-up merges: few and short in practice. */
    const uint32_t block = 16;
    for (uint32_t start = 0; start < count; start += block) {
        uint32_t end = start + block < count ? start + block : count;
        for (uint32_t i = start + 1; i < end; i++) {
            sort_record moving = records[i];
            uint32_t at = i;
            while (at > start && record_before(vocab, &moving, &records[at - 1])) {
                records[at] = records[at - 1];
                at--;
            }
            records[at] = moving;
        }
    }
    for (uint32_t width = block; width < count; width *= 2) {
        for (uint32_t start = 0; start < count; start += 2 * width) {
            uint32_t middle = start + width < count ? start + width : count;
            uint32_t end = start + 2 * width < count ? start + 2 * width : count;
            uint32_t left = start, right = middle, out = start;
            while (left < middle && right < end) {
                scratch[out++] = record_before(vocab, &records[right], &records[left])
                                     ? records[right++]
                                     : records[left++];
            }
            while (left < middle) {
                scratch[out++] = records[left++];
            }
            while (right < end) {
                scratch[out++] = records[right++];
            }
        }
        memcpy(records, scratch, (size_t)count * sizeof(sort_record));
        if (width > UINT32_MAX / 4) {
            break;
        }
    }
}

/* Bytes shared by two neighbouring records (a before b). */
static uint32_t common_prefix(const struct tki_vocab *vocab, const sort_record *a,
                              const sort_record *b) {
    uint32_t shorter = a->length < b->length ? a->length : b->length;
    uint32_t shared = 0;
    uint64_t difference = a->key ^ b->key;
    while (shared < 8 && (difference >> 56) == 0) {
        difference <<= 8;
        shared++;
    }
    if (shared == 8 && shorter > 8) {
        const uint8_t *a_bytes = tki_token_data(vocab, a->rank);
        const uint8_t *b_bytes = tki_token_data(vocab, b->rank);
        while (shared < shorter && a_bytes[shared] == b_bytes[shared]) {
            shared++;
        }
    }
    return shared < shorter ? shared : shorter;
}

void tki_token_order_free(tki_token_order *order) {
    free(order->rank);
    free(order->common_prefix);
    order->rank = NULL;
    order->common_prefix = NULL;
    order->count = 0;
}

int32_t tki_token_order_build(const struct tki_vocab *vocab, tki_token_order *order) {
    int32_t status = TKI_ERR_NOMEM;
    uint32_t count = vocab->token_count;
    memset(order, 0, sizeof(*order));
    sort_record *records = malloc(((size_t)count + 1) * sizeof(sort_record));
    sort_record *scratch = malloc(((size_t)count + 1) * sizeof(sort_record));
    uint32_t (*histogram)[256] = calloc(8, sizeof(*histogram));
    order->rank = malloc(((size_t)count + 1) * sizeof(uint32_t));
    order->common_prefix = malloc(((size_t)count + 1) * sizeof(uint16_t));
    if (records == NULL || scratch == NULL || histogram == NULL || order->rank == NULL ||
        order->common_prefix == NULL) {
        goto cleanup;
    }
    uint32_t used = 0;
    for (uint32_t rank = 0; rank < vocab->rank_limit && used < count; rank++) {
        if (vocab->token_kind[rank] != TKI_KIND_MERGEABLE) {
            continue;
        }
        const uint8_t *data = tki_token_data(vocab, rank);
        uint32_t length = vocab->token_length[rank];
        uint64_t key = 0;
        for (uint32_t i = 0; i < 8; i++) {
            key = (key << 8) | (i < length ? data[i] : 0u);
        }
        records[used] = (sort_record){key, rank, length};
        for (uint32_t digit = 0; digit < 8; digit++) {
            histogram[digit][(key >> (8 * digit)) & 0xffu]++;
        }
        used++;
    }
    if (used != count) {
        status = TKI_ERR_INTERNAL;
        goto cleanup;
    }
    /* Least significant byte first; a byte every key shares moves nothing. */
    for (uint32_t digit = 0; digit < 8; digit++) {
        uint32_t start[256];
        uint32_t total = 0, largest = 0;
        for (uint32_t value = 0; value < 256; value++) {
            start[value] = total;
            total += histogram[digit][value];
            largest = histogram[digit][value] > largest ? histogram[digit][value] : largest;
        }
        if (largest == count) {
            continue;
        }
        for (uint32_t i = 0; i < count; i++) {
            scratch[start[(records[i].key >> (8 * digit)) & 0xffu]++] = records[i];
        }
        sort_record *swap = records;
        records = scratch;
        scratch = swap;
    }
    for (uint32_t run_start = 0; run_start < count;) {
        uint32_t run_end = run_start + 1;
        while (run_end < count && records[run_end].key == records[run_start].key) {
            run_end++;
        }
        if (run_end - run_start > 1) {
            sort_equal_keys(vocab, records + run_start, run_end - run_start, scratch);
        }
        run_start = run_end;
    }
    for (uint32_t i = 0; i < count; i++) {
        order->rank[i] = records[i].rank;
        order->common_prefix[i] =
            i == 0 ? 0 : (uint16_t)common_prefix(vocab, &records[i - 1], &records[i]);
    }
    order->count = count;
    status = TKI_OK;
cleanup:
    free(records);
    free(scratch);
    free(histogram);
    if (status != TKI_OK) {
        tki_token_order_free(order);
    }
    return status;
}
