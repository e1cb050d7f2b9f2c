/*
 * exact_step.c — the step for a piece that holds a watched token
 * (properize.c): theta(m) from tiktoken's merge rule on two tokens, exact for
 * any vocabulary.
 *
 * Call two tokens t, u compatible when tiktoken's merge rule on the bytes of
 * t + u ends as the two parts [t, u].  For any vocabulary, tiktoken's result
 * on a text is the one split of it into canonical tokens whose neighbours are
 * all compatible:
 *   - in the text, the merges inside the span of two neighbours t, u happen
 *     in the order they would in t + u alone (each was the lowest pair of the
 *     whole text, so of the span), and none crosses their boundary, so t + u
 *     alone ends as [t, u];
 *   - conversely, in a split whose neighbours are compatible, the first merge
 *     across a boundary would also be the first across it in that pair alone,
 *     where there is none; so no boundary is crossed, and each token's span
 *     merges as the token alone does, into the token.
 * So theta(m), the last token of the text's first m bytes, is the one
 * canonical suffix z of them that spans them or is compatible with
 * theta(m - |z|); the canonical suffixes are tau's suffix chain.  The
 * incremental step's answer is tried first (outside the watched token's reach
 * it is right); a try runs the heap BPE on at most 2t bytes, and a step at
 * most the chain's length of tries: bounded per byte, and the steps stay a
 * function of the automaton's state and the last t thetas, as the stepper's
 * copies of periodic stretches and the stream's certain ends assume.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int32_t tki_exact_scratch_init(tki_exact_scratch *scratch, const struct tki_vocab *vocab) {
    memset(scratch, 0, sizeof(*scratch));
    size_t capacity = 2 * (size_t)vocab->max_token_bytes;
    int32_t status = tki_heap_workspace_init(&scratch->heap, capacity);
    if (status != TKI_OK) {
        return status;
    }
    scratch->bytes = malloc(capacity);
    scratch->parts = malloc((capacity + 1) * sizeof(uint32_t));
    if (scratch->bytes == NULL || scratch->parts == NULL) {
        tki_exact_scratch_free(scratch);
        return TKI_ERR_NOMEM;
    }
    return TKI_OK;
}

void tki_exact_scratch_free(tki_exact_scratch *scratch) {
    tki_heap_workspace_free(&scratch->heap);
    free(scratch->bytes);
    free(scratch->parts);
    memset(scratch, 0, sizeof(*scratch));
}

/* Whether tiktoken's merge rule on left + right ends as [left, right]. */
static int compatible(const struct tki_vocab *vocab, tki_exact_scratch *scratch, uint32_t left,
                      uint32_t right) {
    uint32_t left_length = vocab->token_length[left], right_length = vocab->token_length[right];
    memcpy(scratch->bytes, tki_token_data(vocab, left), left_length);
    memcpy(scratch->bytes + left_length, tki_token_data(vocab, right), right_length);
    size_t count = 0;
    int32_t status = tki_heap_bpe(vocab, &scratch->heap, scratch->bytes, left_length + right_length,
                                  scratch->parts, &count, NULL);
    return status == TKI_OK && count == 2 && scratch->parts[0] == left && scratch->parts[1] == right;
}

/* Whether canonical suffix z is theta: it spans the text, or is compatible with the token before it. */
static int is_theta(const struct tki_vocab *vocab, tki_exact_scratch *scratch, uint32_t z,
                    const uint32_t *theta_end, uint64_t text_length) {
    uint32_t length = vocab->token_length[z];
    return length == text_length || compatible(vocab, scratch, theta_end[-(ptrdiff_t)length], z);
}

uint32_t tki_exact_theta(const struct tki_vocab *vocab, tki_exact_scratch *scratch, uint32_t tau,
                         uint32_t hint, const uint32_t *theta_end, uint64_t text_length) {
    if (hint != TKI_NONE && is_theta(vocab, scratch, hint, theta_end, text_length)) {
        return hint;
    }
    for (uint32_t z = tau; z != TKI_NONE; z = vocab->suffix_parent[z]) {
        if (z != hint && is_theta(vocab, scratch, z, theta_end, text_length)) {
            return z;
        }
    }
    return TKI_NONE; /* none: the tables are inconsistent */
}
