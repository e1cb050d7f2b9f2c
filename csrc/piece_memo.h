/*
 * piece_memo.h — the ranks of short pieces that are no token, kept from one
 * call to the next: the look-up and the store, inline for the engine's batch
 * loop (encode.c); the memos themselves are made and pooled in piece_memo.c.
 *
 * Real text repeats its pieces, and many that are not a token come again
 * (a name, a word of another script, an identifier in code).  The engine steps
 * such a piece a byte at a time; a memo keeps the ranks of a piece of up to
 * TKI_MEMO_PIECE_BYTES bytes that has up to TKI_MEMO_RANKS of them, so that
 * the next time the piece costs a look-up and a copy.  With a memo of 2^12
 * pieces kept through a pass over the corpora's documents (cl100k_base), a
 * piece found there holds 35% of the bytes of such pieces in English, 39% in
 * multilingual text, 67% in code, and 15% in Chinese, whose runs of
 * characters are mostly longer than a memo keeps.  Per document, that made
 * the pass 2-11% faster (cl100k_base: Chinese 2%, English 7%, multilingual
 * 8%, code 11%; o200k_base, whose tokens cover more of such text, 1-8%).
 *
 * A memo is a direct-mapped table of TKI_MEMO_SLOTS slots of one cache line,
 * indexed by the piece's hash slot in the token table (tki_hash_locate has
 * computed it already).  A slot holds the piece as the token hash compares
 * keys: its first eight bytes (the head), its length and bytes 8..10 (the
 * middle word), and here bytes 11..26.  An empty slot's middle word is 0,
 * which no piece has (its low byte is the length).  The ranks depend on the
 * piece's bytes alone, so whatever a memo holds is right for every call, and
 * a slot that another piece took since is only a miss.
 */
#ifndef TIKTOKEN_INC_PIECE_MEMO_H
#define TIKTOKEN_INC_PIECE_MEMO_H

#include <string.h>

#include "internal.h"
#include "token_hash.h"

typedef struct tki_memo_slot {
    uint64_t head;       /* bytes 0..7, zero-padded (tki_hash_head)           */
    uint32_t middle;     /* the length and bytes 8..10 (tki_hash_middle); 0: empty */
    uint32_t rank_count; /* 1..TKI_MEMO_RANKS                                 */
    uint8_t rest[TKI_MEMO_PIECE_BYTES - TKI_HASH_INLINE_BYTES]; /* bytes 11.., zero-padded */
    uint32_t rank[TKI_MEMO_RANKS];
} tki_memo_slot;

struct tki_piece_memo {
    tki_memo_slot slots[TKI_MEMO_SLOTS];
    void *allocation; /* what free() takes: the memo starts at the first cache line in it */
};

_Static_assert(sizeof(tki_memo_slot) == 64, "a memo slot is one cache line");

static inline tki_memo_slot *tki_memo_slot_for(tki_piece_memo *memo, tki_hash_probe_state where) {
    return &memo->slots[where.slot & (TKI_MEMO_SLOTS - 1)];
}

/* The slot that holds piece[0..len) (len <= TKI_MEMO_PIECE_BYTES; `where` located for it), or NULL. */
static inline const tki_memo_slot *tki_memo_find(tki_piece_memo *memo, tki_hash_probe_state where,
                                                 const uint8_t *piece, size_t len) {
    const tki_memo_slot *slot = tki_memo_slot_for(memo, where);
    if (slot->middle != where.middle || slot->head != where.head) {
        return NULL;
    }
    if (len > TKI_HASH_INLINE_BYTES && memcmp(slot->rest, piece + TKI_HASH_INLINE_BYTES,
                                              len - TKI_HASH_INLINE_BYTES) != 0) {
        return NULL;
    }
    return slot;
}

/* Keeps the ranks[0..count) of piece[0..len) (len <= TKI_MEMO_PIECE_BYTES; `where` located for it),
 * if they fit. */
static inline void tki_memo_store(tki_piece_memo *memo, tki_hash_probe_state where, const uint8_t *piece,
                                  size_t len, const uint32_t *ranks, size_t count) {
    if (count == 0 || count > TKI_MEMO_RANKS) {
        return;
    }
    tki_memo_slot *slot = tki_memo_slot_for(memo, where);
    slot->head = where.head;
    slot->middle = where.middle;
    slot->rank_count = (uint32_t)count;
    memset(slot->rest, 0, sizeof(slot->rest));
    if (len > TKI_HASH_INLINE_BYTES) {
        memcpy(slot->rest, piece + TKI_HASH_INLINE_BYTES, len - TKI_HASH_INLINE_BYTES);
    }
    memcpy(slot->rank, ranks, count * sizeof(uint32_t));
}

#endif /* TIKTOKEN_INC_PIECE_MEMO_H */
