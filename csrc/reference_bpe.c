/*
 * reference_bpe.c — tiktoken's merge rule, exactly, with a binary heap.
 *
 * Start from one part per byte; repeatedly merge the adjacent pair whose
 * concatenation has the lowest rank, the leftmost on a tie; stop when no
 * adjacent pair concatenates to a token.  O(n log n) per piece.
 *
 * Its users: the build (which tokens are canonical, what their last merge
 * was, whether merge ranks ever go down; with new rule priorities in place of
 * the ranks, properize.c's check), vocabularies on which the incremental
 * algorithm is not exact (the fallback), the exact step's test of two tokens
 * (exact_step.c), and the tests (the oracle for the incremental step,
 * through TKI_METHOD_HEAP).
 *
 * Parts are named by their first byte.  A heap entry remembers the pair as
 * it was when pushed (left start, right start, right end); a popped entry
 * whose pair has since changed is stale and skipped.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int32_t tki_heap_workspace_init(tki_heap_workspace *work, size_t capacity) {
    memset(work, 0, sizeof(*work));
    if (capacity == 0) {
        capacity = 1;
    }
    if (capacity > UINT32_MAX - 1 || capacity > SIZE_MAX / (3 * sizeof(tki_heap_entry))) {
        return TKI_ERR_ARGUMENT;
    }
    work->next_start = malloc(capacity * sizeof(uint32_t));
    work->prev_start = malloc(capacity * sizeof(uint32_t));
    work->alive = malloc(capacity);
    work->heap = malloc(3 * capacity * sizeof(tki_heap_entry));
    if (work->next_start == NULL || work->prev_start == NULL || work->alive == NULL ||
        work->heap == NULL) {
        tki_heap_workspace_free(work);
        return TKI_ERR_NOMEM;
    }
    work->capacity = capacity;
    return TKI_OK;
}

void tki_heap_workspace_free(tki_heap_workspace *work) {
    free(work->next_start);
    free(work->prev_start);
    free(work->alive);
    free(work->heap);
    memset(work, 0, sizeof(*work));
}

static int entry_before(const tki_heap_entry *a, const tki_heap_entry *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(tki_heap_entry *heap, size_t *size, tki_heap_entry entry) {
    size_t at = (*size)++;
    while (at > 0) {
        size_t parent = (at - 1) / 2;
        if (!entry_before(&entry, &heap[parent])) {
            break;
        }
        heap[at] = heap[parent];
        at = parent;
    }
    heap[at] = entry;
}

static tki_heap_entry heap_pop(tki_heap_entry *heap, size_t *size) {
    tki_heap_entry top = heap[0];
    tki_heap_entry moved = heap[--(*size)];
    size_t at = 0;
    for (;;) {
        size_t child = 2 * at + 1;
        if (child >= *size) {
            break;
        }
        if (child + 1 < *size && entry_before(&heap[child + 1], &heap[child])) {
            child++;
        }
        if (!entry_before(&heap[child], &moved)) {
            break;
        }
        heap[at] = heap[child];
        at = child;
    }
    if (*size > 0) {
        heap[at] = moved;
    }
    return top;
}

/*
 * Pushes the pair (left, right) if their concatenation is a token (with
 * `priority`: one that has a priority there), keyed by its rank (its priority).
 */
static void push_pair(const struct tki_vocab *vocab, const uint32_t *priority,
                      tki_heap_workspace *work, size_t *size, const uint8_t *piece, uint32_t left,
                      uint32_t right, uint32_t length) {
    if (right >= length) {
        return;
    }
    uint32_t right_end = work->next_start[right];
    uint32_t rank = tki_lookup_rank(vocab, piece + left, right_end - left);
    if (rank != TKI_NONE && priority != NULL) {
        rank = priority[rank];
    }
    if (rank != TKI_NONE) {
        tki_heap_entry entry = {rank, left, right, right_end};
        heap_push(work->heap, size, entry);
    }
}

int32_t tki_heap_bpe(const struct tki_vocab *vocab, tki_heap_workspace *work,
                     const uint8_t *piece, size_t len, uint32_t *out, size_t *out_count,
                     tki_merge_record *record) {
    return tki_heap_bpe_with_priorities(vocab, work, NULL, piece, len, out, out_count, record);
}

int32_t tki_heap_bpe_with_priorities(const struct tki_vocab *vocab, tki_heap_workspace *work,
                                     const uint32_t *priority, const uint8_t *piece, size_t len,
                                     uint32_t *out, size_t *out_count, tki_merge_record *record) {
    if (len > work->capacity) {
        return TKI_ERR_ARGUMENT;
    }
    uint32_t length = (uint32_t)len;
    size_t heap_size = 0;
    uint32_t previous_rank = 0;
    if (record != NULL) {
        memset(record, 0, sizeof(*record));
    }
    for (uint32_t i = 0; i < length; i++) {
        work->next_start[i] = i + 1;
        work->prev_start[i] = i == 0 ? TKI_NONE : i - 1;
        work->alive[i] = 1;
    }
    for (uint32_t i = 0; i + 1 < length; i++) {
        push_pair(vocab, priority, work, &heap_size, piece, i, i + 1, length);
    }
    while (heap_size > 0) {
        tki_heap_entry entry = heap_pop(work->heap, &heap_size);
        if (!work->alive[entry.left] || !work->alive[entry.right] ||
            work->next_start[entry.left] != entry.right ||
            work->next_start[entry.right] != entry.right_end) {
            continue; /* stale: one of its parts has merged since */
        }
        if (record != NULL) {
            if (record->merges > 0 && entry.rank < previous_rank) {
                record->ranks_descended = 1;
            }
            record->merges++;
            record->last_left_length = entry.right - entry.left;
            previous_rank = entry.rank;
        }
        work->alive[entry.right] = 0;
        work->next_start[entry.left] = entry.right_end;
        if (entry.right_end < length) {
            work->prev_start[entry.right_end] = entry.left;
        }
        if (work->prev_start[entry.left] != TKI_NONE) {
            push_pair(vocab, priority, work, &heap_size, piece, work->prev_start[entry.left],
                      entry.left, length);
        }
        push_pair(vocab, priority, work, &heap_size, piece, entry.left, entry.right_end, length);
    }
    size_t count = 0;
    for (uint32_t start = 0; start < length; start = work->next_start[start]) {
        uint32_t rank = tki_lookup_rank(vocab, piece + start, work->next_start[start] - start);
        if (rank == TKI_NONE) { /* a single byte the vocabulary has no rank for */
            return TKI_ERR_NO_BYTE_TOKEN;
        }
        out[count++] = rank;
    }
    *out_count = count;
    return TKI_OK;
}
