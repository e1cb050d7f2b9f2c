/*
 * image.c — a built vocabulary as one flat, checksummed image, so that the
 * tables need not be rebuilt in every process (the caller caches it on disk).
 *
 * Layout: a fixed header (magic, format version, the sizes of the structs,
 * the scalar fields, the payload length and a 64-bit checksum of the
 * payload), then every table in a fixed order, each starting on a 64-byte
 * boundary.  Reading checks the header against this build and the checksum
 * against the payload before anything is trusted; any mismatch is
 * TKI_ERR_ARGUMENT, and the caller rebuilds.  A read image is borrowed: the
 * tables point into the caller's buffer (a read-only mapping of the cache
 * file can be shared between processes), which must outlive the vocabulary.
 *
 * The checksum is a stream over the payload, so an image can also be written
 * as pieces (the header, then each table and its padding) straight from the
 * tables, with no contiguous copy; and a mapped image can be checked a chunk
 * at a time, each chunk's pages released once read (Linux), so that checking
 * it does not make the whole file resident in the process.
 */
#define _DEFAULT_SOURCE /* madvise and MADV_DONTNEED under -std=c11 */

#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include "internal.h"

#define IMAGE_MAGIC "TKIVOCAB"
#define IMAGE_FORMAT 9u
#define IMAGE_ALIGN 64u
#define CHECK_CHUNK_BYTES ((uint64_t)4 << 20) /* checked, then released, at a time */
#if IMAGE_ALIGN % 64 != 0
#error "the checksum reads groups of 64 bytes: IMAGE_ALIGN must be a multiple"
#endif

typedef struct image_header {
    char magic[8];
    uint32_t format;
    uint32_t endian_check;   /* 0x01020304 as written by this machine */
    uint32_t slot_size;      /* sizeof(tki_hash_slot)                  */
    uint32_t rule_size;      /* sizeof(tki_token_rule)                 */
    uint32_t node_size;      /* sizeof(tki_decomposition_node)         */
    uint32_t rank_limit;
    uint32_t token_count;
    uint32_t special_count;
    uint32_t max_token_bytes;
    uint32_t noncanonical_count;
    uint32_t improper_count;
    uint32_t incremental;
    uint32_t state_count;
    uint32_t automaton_blocks;
    uint32_t longest_suffix_chain;
    uint32_t longest_noncanonical;
    uint64_t hash_mask;
    uint64_t decomposition_nodes;
    uint64_t pool_size;
    uint64_t payload_size;
    uint64_t checksum;
} image_header;

/* One table of the image: where its pointer lives in the vocabulary, and its size. */
typedef struct image_section {
    void **pointer;
    uint64_t size;
} image_section;

static uint64_t pool_size_of(const struct tki_vocab *vocab) {
    uint64_t size = 0;
    for (uint32_t rank = 0; rank < vocab->rank_limit; rank++) {
        size += vocab->token_length[rank];
    }
    return size;
}

/* The tables in image order; returns how many (7, or 11 for an incremental vocabulary). */
static size_t list_sections(struct tki_vocab *vocab, uint64_t pool_size, image_section *out) {
    uint64_t ranks = vocab->rank_limit;
    size_t n = 0;
    out[n++] = (image_section){(void **)&vocab->pool, pool_size};
    out[n++] = (image_section){(void **)&vocab->token_offset, ranks * sizeof(uint64_t)};
    out[n++] = (image_section){(void **)&vocab->token_length, ranks * sizeof(uint32_t)};
    out[n++] = (image_section){(void **)&vocab->token_kind, ranks};
    out[n++] = (image_section){(void **)&vocab->hash_slots, (vocab->hash_mask + 1) * sizeof(tki_hash_slot)};
    out[n++] = (image_section){(void **)&vocab->rule_flags, ranks};
    out[n++] = (image_section){(void **)&vocab->rule, ranks * sizeof(tki_token_rule)};
    if (vocab->incremental) {
        out[n++] = (image_section){(void **)&vocab->automaton,
                                   (uint64_t)vocab->automaton_blocks * TKI_TILE_WIDTH * sizeof(uint32_t)};
        out[n++] = (image_section){(void **)&vocab->suffix_parent, ranks * sizeof(uint32_t)};
        out[n++] = (image_section){(void **)&vocab->decomposition_start, ranks * sizeof(uint32_t)};
        out[n++] = (image_section){(void **)&vocab->decomposition,
                                   vocab->decomposition_nodes * sizeof(tki_decomposition_node)};
    }
    return n;
}

static uint64_t aligned(uint64_t size) {
    return (size + IMAGE_ALIGN - 1) / IMAGE_ALIGN * IMAGE_ALIGN;
}

static uint64_t payload_size_of(const image_section *sections, size_t count) {
    uint64_t size = 0;
    for (size_t i = 0; i < count; i++) {
        size += aligned(sections[i].size);
    }
    return size;
}

/*
 * Fletcher-style sums over 8-byte words in CHECKSUM_LANES independent lanes
 * (a running sum and a sum of sums each, so changed and moved words both
 * show), mixed at the end: memory-bound, about 12 ms for the 78 MB image of
 * o200k_base.  Fed in groups of one word per lane; a payload is a multiple of
 * IMAGE_ALIGN bytes, itself a multiple of the group.
 */
#define CHECKSUM_LANES 8
#define CHECKSUM_GROUP_BYTES (8u * CHECKSUM_LANES)

typedef struct checksum_state {
    uint64_t sum[CHECKSUM_LANES];
    uint64_t sum_of_sums[CHECKSUM_LANES];
    uint64_t bytes;
} checksum_state;

static void checksum_groups(checksum_state *state, const uint8_t *data, uint64_t size) {
    /* In locals: data is bytes, which may alias *state, so the compiler would reload it. */
    uint64_t sum[CHECKSUM_LANES], sum_of_sums[CHECKSUM_LANES];
    memcpy(sum, state->sum, sizeof(sum));
    memcpy(sum_of_sums, state->sum_of_sums, sizeof(sum_of_sums));
    for (uint64_t i = 0; i + CHECKSUM_GROUP_BYTES <= size; i += CHECKSUM_GROUP_BYTES) {
        uint64_t word[CHECKSUM_LANES];
        memcpy(word, data + i, CHECKSUM_GROUP_BYTES);
        for (int k = 0; k < CHECKSUM_LANES; k++) {
            sum[k] += word[k];
            sum_of_sums[k] += sum[k];
        }
    }
    memcpy(state->sum, sum, sizeof(sum));
    memcpy(state->sum_of_sums, sum_of_sums, sizeof(sum_of_sums));
    state->bytes += size / CHECKSUM_GROUP_BYTES * CHECKSUM_GROUP_BYTES;
}

/* size bytes of data then `padding` zero bytes (together a multiple of the group). */
static void checksum_padded(checksum_state *state, const uint8_t *data, uint64_t size,
                            uint64_t padding) {
    uint64_t whole = size / CHECKSUM_GROUP_BYTES * CHECKSUM_GROUP_BYTES;
    checksum_groups(state, data, whole);
    uint64_t zero_groups = padding / CHECKSUM_GROUP_BYTES;
    if (size > whole) {
        uint8_t last[CHECKSUM_GROUP_BYTES] = {0};
        memcpy(last, data + whole, (size_t)(size - whole));
        checksum_groups(state, last, CHECKSUM_GROUP_BYTES);
        zero_groups = (padding - (CHECKSUM_GROUP_BYTES - (size - whole))) / CHECKSUM_GROUP_BYTES;
    }
    for (int k = 0; k < CHECKSUM_LANES; k++) {
        state->sum_of_sums[k] += zero_groups * state->sum[k];
    }
    state->bytes += zero_groups * CHECKSUM_GROUP_BYTES;
}

static uint64_t checksum_final(const checksum_state *state) {
    uint64_t hash = state->bytes;
    for (int k = 0; k < CHECKSUM_LANES; k++) {
        hash = (hash ^ state->sum[k]) * 0xff51afd7ed558ccdull;
        hash ^= hash >> 32;
        hash = (hash ^ state->sum_of_sums[k]) * 0xc4ceb9fe1a85ec53ull;
        hash ^= hash >> 29;
    }
    return hash;
}

/* The checksum of the payload the sections make (each padded to IMAGE_ALIGN). */
static uint64_t checksum_sections(const image_section *sections, size_t count) {
    checksum_state state;
    memset(&state, 0, sizeof(state));
    for (size_t i = 0; i < count; i++) {
        const uint8_t *data = sections[i].size > 0 ? *sections[i].pointer : NULL;
        checksum_padded(&state, data, sections[i].size, aligned(sections[i].size) - sections[i].size);
    }
    return checksum_final(&state);
}

/*
 * The checksum of a contiguous payload (a multiple of IMAGE_ALIGN bytes).  With
 * release_pages, the image is a read-only file mapping: each checked chunk's
 * whole pages are dropped from the process (they stay in the page cache).
 */
static uint64_t checksum_payload(const uint8_t *payload, uint64_t size, int release_pages) {
    checksum_state state;
    memset(&state, 0, sizeof(state));
#if defined(__linux__) && defined(MADV_DONTNEED)
    long page_size = sysconf(_SC_PAGESIZE);
    uintptr_t page_mask = page_size > 0 ? (uintptr_t)page_size - 1 : 0;
    uintptr_t released = ((uintptr_t)payload + page_mask) & ~page_mask; /* the next page to drop */
    release_pages = release_pages && page_size > 0;
#else
    (void)release_pages;
#endif
    for (uint64_t at = 0; at < size; at += CHECK_CHUNK_BYTES) {
        uint64_t chunk = size - at < CHECK_CHUNK_BYTES ? size - at : CHECK_CHUNK_BYTES;
        checksum_groups(&state, payload + at, chunk);
#if defined(__linux__) && defined(MADV_DONTNEED)
        /* The whole pages read so far, not yet dropped. */
        uintptr_t end = (uintptr_t)(payload + at + chunk) & ~page_mask;
        if (release_pages && end > released) {
            (void)madvise((void *)released, (size_t)(end - released), MADV_DONTNEED);
            released = end;
        }
#endif
    }
    return checksum_final(&state);
}

int32_t tki_vocab_image_size(const tki_vocab *vocab, uint64_t *out_size) {
    if (vocab == NULL || out_size == NULL) {
        return TKI_ERR_ARGUMENT;
    }
    image_section sections[16];
    size_t count = list_sections((struct tki_vocab *)vocab, pool_size_of(vocab), sections);
    *out_size = aligned(sizeof(image_header)) + payload_size_of(sections, count);
    return TKI_OK;
}

int32_t tki_vocab_image_header(const tki_vocab *vocab, uint8_t *out, uint64_t capacity,
                               uint64_t *out_size) {
    if (vocab == NULL || out_size == NULL) {
        return TKI_ERR_ARGUMENT;
    }
    *out_size = aligned(sizeof(image_header));
    if (out == NULL) {
        return TKI_OK;
    }
    if (capacity < *out_size) {
        return TKI_ERR_ARGUMENT;
    }
    image_section sections[16];
    uint64_t pool_size = pool_size_of(vocab);
    size_t count = list_sections((struct tki_vocab *)vocab, pool_size, sections);
    image_header header;
    memset(&header, 0, sizeof(header));
    memcpy(header.magic, IMAGE_MAGIC, 8);
    header.format = IMAGE_FORMAT;
    header.endian_check = 0x01020304u;
    header.slot_size = sizeof(tki_hash_slot);
    header.rule_size = sizeof(tki_token_rule);
    header.node_size = sizeof(tki_decomposition_node);
    header.rank_limit = vocab->rank_limit;
    header.token_count = vocab->token_count;
    header.special_count = vocab->special_count;
    header.max_token_bytes = vocab->max_token_bytes;
    header.noncanonical_count = vocab->noncanonical_count;
    header.improper_count = vocab->improper_count;
    header.incremental = vocab->incremental;
    header.state_count = vocab->state_count;
    header.automaton_blocks = vocab->automaton_blocks;
    header.longest_suffix_chain = vocab->longest_suffix_chain;
    header.longest_noncanonical = vocab->longest_noncanonical;
    header.hash_mask = vocab->hash_mask;
    header.decomposition_nodes = vocab->decomposition_nodes;
    header.pool_size = pool_size;
    header.payload_size = payload_size_of(sections, count);
    header.checksum = checksum_sections(sections, count);
    memset(out, 0, (size_t)*out_size);
    memcpy(out, &header, sizeof(header));
    return TKI_OK;
}

int32_t tki_vocab_image_piece(const tki_vocab *vocab, uint32_t index, const uint8_t **out_data,
                              uint64_t *out_size, uint64_t *out_padding) {
    if (vocab == NULL || out_data == NULL || out_size == NULL || out_padding == NULL) {
        return TKI_ERR_ARGUMENT;
    }
    image_section sections[16];
    size_t count = list_sections((struct tki_vocab *)vocab, pool_size_of(vocab), sections);
    if (index >= count) {
        return TKI_ERR_ARGUMENT;
    }
    *out_data = *sections[index].pointer;
    *out_size = sections[index].size;
    *out_padding = aligned(sections[index].size) - sections[index].size;
    return TKI_OK;
}

int32_t tki_vocab_write_image(const tki_vocab *vocab, uint8_t *out, uint64_t size) {
    uint64_t needed = 0, at = 0;
    if (out == NULL || tki_vocab_image_size(vocab, &needed) != TKI_OK || size < needed ||
        tki_vocab_image_header(vocab, out, size, &at) != TKI_OK) {
        return TKI_ERR_ARGUMENT;
    }
    const uint8_t *data = NULL;
    uint64_t piece_size = 0, padding = 0;
    for (uint32_t i = 0; tki_vocab_image_piece(vocab, i, &data, &piece_size, &padding) == TKI_OK;
         i++) {
        if (piece_size > 0) {
            memcpy(out + at, data, (size_t)piece_size);
        }
        memset(out + at + piece_size, 0, (size_t)padding);
        at += piece_size + padding;
    }
    return TKI_OK;
}

static int32_t read_image(const uint8_t *image, uint64_t size, int release_pages,
                          tki_vocab **out_vocab) {
    if (image == NULL || out_vocab == NULL || size < aligned(sizeof(image_header)) ||
        ((uintptr_t)image % IMAGE_ALIGN) != 0) {
        return TKI_ERR_ARGUMENT;
    }
    *out_vocab = NULL;
    image_header header;
    memcpy(&header, image, sizeof(header));
    if (memcmp(header.magic, IMAGE_MAGIC, 8) != 0 || header.format != IMAGE_FORMAT ||
        header.endian_check != 0x01020304u || header.slot_size != sizeof(tki_hash_slot) ||
        header.rule_size != sizeof(tki_token_rule) ||
        header.node_size != sizeof(tki_decomposition_node) || header.rank_limit == 0 ||
        header.hash_mask == UINT64_MAX || ((header.hash_mask + 1) & header.hash_mask) != 0 ||
        header.max_token_bytes > TKI_MAX_TOKEN_BYTES ||
        header.payload_size != size - aligned(sizeof(image_header)) ||
        header.payload_size % IMAGE_ALIGN != 0) {
        return TKI_ERR_ARGUMENT;
    }
    const uint8_t *payload = image + aligned(sizeof(image_header));
    if (checksum_payload(payload, header.payload_size, release_pages) != header.checksum) {
        return TKI_ERR_ARGUMENT;
    }
    struct tki_vocab *vocab = calloc(1, sizeof(*vocab));
    if (vocab == NULL) {
        return TKI_ERR_NOMEM;
    }
    vocab->borrowed = 1;
    vocab->rank_limit = header.rank_limit;
    vocab->token_count = header.token_count;
    vocab->special_count = header.special_count;
    vocab->max_token_bytes = header.max_token_bytes;
    vocab->noncanonical_count = header.noncanonical_count;
    vocab->improper_count = header.improper_count;
    vocab->incremental = header.incremental != 0;
    vocab->state_count = header.state_count;
    vocab->automaton_blocks = header.automaton_blocks;
    vocab->longest_suffix_chain = header.longest_suffix_chain;
    vocab->longest_noncanonical = header.longest_noncanonical;
    vocab->hash_mask = header.hash_mask;
    vocab->decomposition_nodes = header.decomposition_nodes;
    image_section sections[16];
    size_t count = list_sections(vocab, header.pool_size, sections);
    if (payload_size_of(sections, count) != header.payload_size) {
        free(vocab);
        return TKI_ERR_ARGUMENT;
    }
    uint64_t at = 0;
    for (size_t i = 0; i < count; i++) {
        *sections[i].pointer = (void *)(payload + at);
        at += aligned(sections[i].size);
    }
    *out_vocab = vocab;
    return TKI_OK;
}

int32_t tki_vocab_read_image(const uint8_t *image, uint64_t size, tki_vocab **out_vocab) {
    return read_image(image, size, 0, out_vocab);
}

int32_t tki_vocab_read_mapped_image(const uint8_t *image, uint64_t size, tki_vocab **out_vocab) {
    return read_image(image, size, 1, out_vocab);
}
