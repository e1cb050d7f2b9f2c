/*
 * naive_bpe.h — owns the tests' independent oracle: tiktoken's merge rule
 * written as plainly as possible (rescan every adjacent pair, merge the
 * lowest rank, leftmost on a tie; O(n^2) lookups), with no code shared with
 * the core.  Header-only; used by tests/c/test_core.c and tests/fuzz/.
 */
#ifndef TKI_TEST_NAIVE_BPE_H
#define TKI_TEST_NAIVE_BPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define NAIVE_NONE UINT32_MAX

/* Rank of data[0..len) as a mergeable token, or NAIVE_NONE. */
typedef uint32_t (*naive_lookup_fn)(const void *context, const uint8_t *data, size_t len);

/* What the merges of one naive_bpe call looked like (for classifying tokens). */
typedef struct naive_record {
    uint32_t merges;
    uint32_t ranks_descended;  /* some merge had a lower rank than the one before */
    size_t last_left_length;   /* bytes of the left operand of the last merge     */
} naive_record;

/*
 * BPE of data[0..len): writes the ranks to out (capacity len) and returns
 * their number, or (size_t)-1 if some final part is no token (a vocabulary
 * missing a byte).  `starts` is scratch of len + 1 entries.  record may be NULL.
 */
static inline size_t naive_bpe(naive_lookup_fn lookup, const void *context, const uint8_t *data,
                               size_t len, size_t *starts, uint32_t *out, naive_record *record) {
    size_t parts = len;
    uint32_t previous = 0;
    if (record != NULL) {
        memset(record, 0, sizeof(*record));
    }
    for (size_t i = 0; i <= len; i++) {
        starts[i] = i;
    }
    for (;;) {
        uint32_t best = NAIVE_NONE;
        size_t at = 0;
        for (size_t k = 0; k + 1 < parts; k++) {
            uint32_t rank = lookup(context, data + starts[k], starts[k + 2] - starts[k]);
            if (rank != NAIVE_NONE && (best == NAIVE_NONE || rank < best)) {
                best = rank;
                at = k;
            }
        }
        if (best == NAIVE_NONE) {
            break;
        }
        if (record != NULL) {
            if (record->merges > 0 && best < previous) {
                record->ranks_descended = 1;
            }
            record->merges++;
            record->last_left_length = starts[at + 1] - starts[at];
        }
        previous = best;
        memmove(&starts[at + 1], &starts[at + 2], (parts - at - 1) * sizeof(size_t));
        parts--;
    }
    for (size_t k = 0; k < parts; k++) {
        uint32_t rank = lookup(context, data + starts[k], starts[k + 1] - starts[k]);
        if (rank == NAIVE_NONE) {
            return (size_t)-1;
        }
        out[k] = rank;
    }
    return parts;
}

#endif /* TKI_TEST_NAIVE_BPE_H */
