/*
 * token_hash.h — the bytes -> rank hash's key function and lookup, inline.
 *
 * The table itself is built in token_table.c; the lookup lives here so that
 * the encoder, which looks up every regex piece, compiles it into its batch
 * loop.  A lookup comes in two halves: tki_hash_locate computes the slot and
 * starts loading it, tki_hash_probe finishes, so a caller can have the loads
 * of many lookups in flight before it needs the first answer.
 */
#ifndef TIKTOKEN_INC_TOKEN_HASH_H
#define TIKTOKEN_INC_TOKEN_HASH_H

#include <string.h>

#include "internal.h"

/*
 * Eight bytes at data as a little-endian word on any machine: one load, and on
 * a big-endian one a byte swap, so that a key's head is the same whether it
 * is loaded whole (then masked) or put together a byte at a time; else a
 * big-endian machine would miss every key of fewer than eight bytes that the
 * encoder looks up with bytes to spare after it.  (An image records the byte
 * order it was written with and is refused on another.)
 */
static inline uint64_t tki_load_le64(const uint8_t *data) {
    uint64_t word;
    memcpy(&word, data, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    word = __builtin_bswap64(word);
#endif
    return word;
}

/*
 * The first min(8, len) bytes as a little-endian word, zero-padded.  When
 * `readable` >= 8, eight bytes at data may be read (one load, then a mask).
 */
static inline uint64_t tki_hash_head(const uint8_t *data, size_t len, size_t readable) {
    uint64_t word = 0;
    if (readable >= 8) { /* the mask read, not branched to: pieces' lengths follow no pattern */
        static const uint64_t kept[9] = {0, 0xff, 0xffff, 0xffffff, 0xffffffff, 0xffffffffffull,
                                         0xffffffffffffull, 0xffffffffffffffull, ~0ull};
        word = tki_load_le64(data) & kept[len < 8 ? len : 8];
    } else if (len >= 8) {
        word = tki_load_le64(data);
    } else {
        for (size_t i = 0; i < len; i++) {
            word |= (uint64_t)data[i] << (8 * i);
        }
    }
    return word;
}

/*
 * Multiply-xorshift mixing of whole eight-byte words: the head; for a longer
 * key its last eight bytes (one load, overlapping the words before it) mixed
 * apart from the head, so the two multiplies run side by side; and the
 * words between.  Every byte of the key is mixed in, with no load of a
 * partial word (a byte loop) on the way.
 */
static inline uint64_t tki_hash_key(uint64_t head, const uint8_t *data, size_t len) {
    uint64_t hash = (head ^ ((uint64_t)len << 56)) * 0x9e3779b97f4a7c15ull;
    if (len > 8) {
        uint64_t tail;
        memcpy(&tail, data + len - 8, 8);
        hash ^= (tail ^ 0x2545f4914f6cdd1dull) * 0xff51afd7ed558ccdull;
        for (size_t i = 8; i + 8 < len; i += 8) {
            uint64_t word;
            memcpy(&word, data + i, 8);
            hash = (hash ^ word) * 0xff51afd7ed558ccdull;
            hash ^= hash >> 32;
        }
        hash ^= hash >> 29;
        hash *= 0xc4ceb9fe1a85ec53ull;
    }
    return hash;
}

/*
 * The first slot to probe for a key, in a table of mask + 1 slots (a power of
 * two): the key's top bits, as many as the table has (`shift` is 64 less that
 * many, tki_hash_shift; at most 63, and the mask keeps a table of one slot
 * right).  The top bits of a product depend on every bit of the key, so a key
 * of up to eight bytes takes one multiply.
 */
static inline uint32_t tki_hash_shift(uint64_t mask) {
    return mask == 0 ? 63 : (uint32_t)__builtin_clzll(mask);
}

static inline uint64_t tki_hash_slot_in(uint64_t mask, uint32_t shift, uint64_t head, const uint8_t *data,
                                        size_t len) {
    return (tki_hash_key(head, data, len) >> shift) & mask;
}

static inline uint64_t tki_hash_slot_of(const struct tki_vocab *vocab, uint64_t head,
                                        const uint8_t *data, size_t len) {
    return tki_hash_slot_in(vocab->hash_mask, tki_hash_shift(vocab->hash_mask), head, data, len);
}

/*
 * The slot's middle word: min(len, 255) in its low byte, bytes 8..10 of the
 * key (zero-padded) above.  With the head it holds the whole of a key of up to
 * 11 bytes, so those (nearly all pieces of real text) are compared in the slot
 * alone: a longer one also loads its token's offset and bytes, two more
 * likely cache misses.  `readable` as for tki_hash_head.
 */
#define TKI_HASH_INLINE_BYTES 11

static inline uint32_t tki_hash_middle(const uint8_t *data, size_t len, size_t readable) {
    uint32_t middle = len < 255 ? (uint32_t)len : 255;
    if (len <= 8) {
        return middle;
    }
    size_t kept = len - 8 < 3 ? len - 8 : 3;
    uint32_t word = 0;
    if (readable >= TKI_HASH_INLINE_BYTES) { /* three loads, masked: no branch on the length */
        word = (uint32_t)data[8] | (uint32_t)data[9] << 8 | (uint32_t)data[10] << 16;
        word &= 0xffffffu >> (8 * (3 - kept));
    } else {
        for (size_t i = 0; i < kept; i++) {
            word |= (uint32_t)data[8 + i] << (8 * i);
        }
    }
    return middle | word << 8;
}

/*
 * What a lookup reads of the vocabulary, copied out once per call
 * (tki_hash_view_of): held in locals, these stay in registers across a loop
 * that also calls out of line, where the fields of *vocab would be loaded
 * again after every call (the compiler cannot know that the call leaves them
 * as they were).
 */
typedef struct tki_hash_view {
    const tki_hash_slot *slots;
    uint64_t mask;
    uint32_t shift;                /* tki_hash_shift(mask) */
    size_t max_token_bytes;
    const struct tki_vocab *vocab; /* a key longer than a slot holds: its token's bytes */
} tki_hash_view;

static inline tki_hash_view tki_hash_view_of(const struct tki_vocab *vocab) {
    tki_hash_view view = {vocab->hash_slots, vocab->hash_mask, tki_hash_shift(vocab->hash_mask),
                          vocab->max_token_bytes, vocab};
    return view;
}

/* The first half of a lookup of data[0..len); `readable` as for tki_hash_head. */
static TKI_ALWAYS_INLINE tki_hash_probe_state tki_hash_locate_in(const tki_hash_view *view,
                                                                 const uint8_t *data, size_t len,
                                                                 size_t readable) {
    tki_hash_probe_state where;
    where.head = tki_hash_head(data, len, readable);
    where.middle = tki_hash_middle(data, len, readable);
    where.slot = tki_hash_slot_in(view->mask, view->shift, where.head, data, len);
    TKI_PREFETCH(&view->slots[where.slot]);
    return where;
}

static TKI_ALWAYS_INLINE tki_hash_probe_state tki_hash_locate(const struct tki_vocab *vocab,
                                                              const uint8_t *data, size_t len,
                                                              size_t readable) {
    const tki_hash_view view = tki_hash_view_of(vocab);
    return tki_hash_locate_in(&view, data, len, readable);
}

/* Whether a full slot holds the key data[0..len) that `where` was located for. */
static inline int tki_hash_slot_holds(const struct tki_vocab *vocab, const tki_hash_slot *entry,
                                      tki_hash_probe_state where, const uint8_t *data,
                                      size_t len) {
    if (entry->head != where.head || entry->middle != where.middle) {
        return 0;
    }
    if (len <= TKI_HASH_INLINE_BYTES) {
        return 1;
    }
    if (len >= 255 && vocab->token_length[entry->rank] != len) { /* the middle holds 255 */
        return 0;
    }
    /* Bytes 11..len, eight at a time, the last eight overlapping what is known equal
     * (len >= 12): no call, no byte loop. */
    const uint8_t *token = tki_token_data(vocab, entry->rank);
    size_t at = TKI_HASH_INLINE_BYTES;
    for (; at + 8 < len; at += 8) {
        uint64_t mine, theirs;
        memcpy(&mine, data + at, 8);
        memcpy(&theirs, token + at, 8);
        if (mine != theirs) {
            return 0;
        }
    }
    uint64_t mine, theirs;
    memcpy(&mine, data + len - 8, 8);
    memcpy(&theirs, token + len - 8, 8);
    return mine == theirs;
}

/*
 * The second half for a key of 1..max_token_bytes bytes that `where` was
 * located for, or any key given TKI_HASH_NO_TOKEN (its middle word, 0, is no
 * slot's: a slot's low byte is its key's length): the rank, or TKI_NONE.
 */
#define TKI_HASH_NO_TOKEN ((tki_hash_probe_state){0, 0, 0})

static TKI_ALWAYS_INLINE uint32_t tki_hash_probe_located(const tki_hash_view *view, tki_hash_probe_state where,
                                                         const uint8_t *data, size_t len) {
    for (uint64_t slot = where.slot;; slot = (slot + 1) & view->mask) {
        const tki_hash_slot *entry = &view->slots[slot];
        if (entry->rank == TKI_NONE) {
            return TKI_NONE;
        }
        if (tki_hash_slot_holds(view->vocab, entry, where, data, len)) {
            return entry->rank;
        }
    }
}

/* The second half: the rank of data[0..len), or TKI_NONE. */
static inline uint32_t tki_hash_probe(const struct tki_vocab *vocab, tki_hash_probe_state where,
                                      const uint8_t *data, size_t len) {
    if (len == 0 || len > vocab->max_token_bytes) {
        return TKI_NONE;
    }
    const tki_hash_view view = tki_hash_view_of(vocab);
    return tki_hash_probe_located(&view, where, data, len);
}

#endif /* TIKTOKEN_INC_TOKEN_HASH_H */
