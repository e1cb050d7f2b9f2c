/*
 * piece_memo.c — the memos of a vocabulary (piece_memo.h): made on first
 * need, lent to one call at a time, kept for the next.
 *
 * A memo is written by the call that holds it and read by nobody else, so
 * the engine's look-ups and stores take no lock.  What is shared is the pool:
 * TKI_MEMO_POOL entries in the vocabulary, each an atomic pointer on a cache
 * line of its own.  A call takes a memo by exchanging an entry with NULL and
 * gives it back by a compare-and-exchange into an empty entry.  Each thread
 * starts at an entry picked from the address of its stack, so threads that
 * encode side by side (a batch) each find their own memo where they left it
 * and do not pass one cache line back and forth.  A call that finds none
 * makes one while fewer than TKI_MEMO_POOL exist, else goes without: the
 * memo makes a call faster, never different.  A call inside another on the
 * same thread (a signal handler, a finalizer) cannot find the memo the
 * interrupted call holds, so it cannot change it under that call.
 */
#include <stdlib.h>

#include "internal.h"
#include "piece_memo.h"

/* Where this thread starts looking: the stack's address, 64 KiB at a time, hashed. */
static uint32_t pool_start(void) {
    uint8_t probe = 0;
    uint64_t at = (uint64_t)(uintptr_t)&probe >> 16;
    return (uint32_t)((at * 0x9e3779b97f4a7c15ull) >> 56) % TKI_MEMO_POOL;
}

static tki_piece_memo *memo_new(void) {
    /* calloc: zeroed (every slot empty), and for 256 KiB fresh pages that cost
     * nothing until a slot is written. */
    uint8_t *allocation = calloc(1, sizeof(tki_piece_memo) + 63);
    if (allocation == NULL) {
        return NULL;
    }
    tki_piece_memo *memo = (tki_piece_memo *)(allocation + (64 - (uintptr_t)allocation % 64) % 64);
    memo->allocation = allocation;
    return memo;
}

tki_piece_memo *tki_memo_take(const struct tki_vocab *vocab) {
    struct tki_vocab *owner = (struct tki_vocab *)vocab; /* the pool: atomics only */
    uint32_t start = pool_start();
    for (uint32_t i = 0; i < TKI_MEMO_POOL; i++) {
        _Atomic(tki_piece_memo *) *entry = &owner->memo_pool[(start + i) % TKI_MEMO_POOL].memo;
        if (atomic_load_explicit(entry, memory_order_relaxed) == NULL) {
            continue; /* (a plain load: no locked operation on an empty entry) */
        }
        tki_piece_memo *memo = atomic_exchange_explicit(entry, NULL, memory_order_acquire);
        if (memo != NULL) {
            return memo;
        }
    }
    if (atomic_fetch_add_explicit(&owner->memos_made, 1, memory_order_relaxed) >= TKI_MEMO_POOL) {
        atomic_fetch_sub_explicit(&owner->memos_made, 1, memory_order_relaxed);
        return NULL;
    }
    tki_piece_memo *memo = memo_new();
    if (memo == NULL) {
        atomic_fetch_sub_explicit(&owner->memos_made, 1, memory_order_relaxed);
    }
    return memo;
}

void tki_memo_give_back(const struct tki_vocab *vocab, tki_piece_memo *memo) {
    if (memo == NULL) {
        return;
    }
    struct tki_vocab *owner = (struct tki_vocab *)vocab;
    uint32_t start = pool_start();
    for (uint32_t i = 0; i < TKI_MEMO_POOL; i++) {
        _Atomic(tki_piece_memo *) *entry = &owner->memo_pool[(start + i) % TKI_MEMO_POOL].memo;
        tki_piece_memo *empty = NULL;
        if (atomic_load_explicit(entry, memory_order_relaxed) == NULL &&
            atomic_compare_exchange_strong_explicit(entry, &empty, memo, memory_order_release,
                                                    memory_order_relaxed)) {
            return;
        }
    }
    /* No empty entry: cannot happen while at most TKI_MEMO_POOL exist, but never leak one. */
    free(memo->allocation);
    atomic_fetch_sub_explicit(&owner->memos_made, 1, memory_order_relaxed);
}

void tki_memo_pool_free(struct tki_vocab *vocab) {
    for (uint32_t i = 0; i < TKI_MEMO_POOL; i++) {
        tki_piece_memo *memo = atomic_exchange_explicit(&vocab->memo_pool[i].memo, NULL, memory_order_acquire);
        if (memo != NULL) {
            free(memo->allocation);
            atomic_fetch_sub_explicit(&vocab->memos_made, 1, memory_order_relaxed);
        }
    }
}

void tki_vocab_forget_pieces(tki_vocab *vocab) {
    if (vocab != NULL) {
        tki_memo_pool_free(vocab);
    }
}
