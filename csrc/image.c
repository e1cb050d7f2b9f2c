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
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define IMAGE_MAGIC "TKIVOCAB"
#define IMAGE_FORMAT 2u
#define IMAGE_ALIGN 64u

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
    uint32_t tile_count;
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

/* The tables in image order; returns how many (7, or 14 for an incremental vocabulary). */
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
        uint64_t states = vocab->state_count;
        out[n++] = (image_section){(void **)&vocab->state_tiles, states * TKI_TILE_WIDTH * sizeof(uint32_t)};
        out[n++] = (image_section){(void **)&vocab->tiles,
                                   (uint64_t)vocab->tile_count * TKI_TILE_WIDTH * sizeof(uint32_t)};
        out[n++] = (image_section){(void **)&vocab->longest_token, states * sizeof(uint32_t)};
        out[n++] = (image_section){(void **)&vocab->state_depth, states * sizeof(uint16_t)};
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
 * Fletcher-style sums over 8-byte words in four independent lanes (a running
 * sum and a sum of sums each, so changed and moved words both show), mixed at
 * the end: memory-bound, about 10 ms for the 78 MB image of o200k_base.
 */
static uint64_t checksum(const uint8_t *data, uint64_t size) {
    uint64_t sum[4] = {0, 0, 0, 0};
    uint64_t sum_of_sums[4] = {0, 0, 0, 0};
    uint64_t i = 0;
    for (; i + 32 <= size; i += 32) {
        for (int k = 0; k < 4; k++) {
            uint64_t word;
            memcpy(&word, data + i + 8 * k, 8);
            sum[k] += word;
            sum_of_sums[k] += sum[k];
        }
    }
    uint64_t tail = 0;
    for (uint64_t shift = 0; i < size; i++, shift = (shift + 8) & 63) {
        tail ^= (uint64_t)data[i] << shift;
    }
    uint64_t hash = size ^ (tail * 0x9e3779b97f4a7c15ull);
    for (int k = 0; k < 4; k++) {
        hash = (hash ^ sum[k]) * 0xff51afd7ed558ccdull;
        hash ^= hash >> 32;
        hash = (hash ^ sum_of_sums[k]) * 0xc4ceb9fe1a85ec53ull;
        hash ^= hash >> 29;
    }
    return hash;
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

int32_t tki_vocab_write_image(const tki_vocab *vocab, uint8_t *out, uint64_t size) {
    uint64_t needed = 0;
    if (out == NULL || tki_vocab_image_size(vocab, &needed) != TKI_OK || size < needed) {
        return TKI_ERR_ARGUMENT;
    }
    image_section sections[16];
    uint64_t pool_size = pool_size_of(vocab);
    size_t count = list_sections((struct tki_vocab *)vocab, pool_size, sections);
    memset(out, 0, (size_t)needed);
    uint8_t *payload = out + aligned(sizeof(image_header));
    uint64_t at = 0;
    for (size_t i = 0; i < count; i++) {
        if (sections[i].size > 0) {
            memcpy(payload + at, *sections[i].pointer, (size_t)sections[i].size);
        }
        at += aligned(sections[i].size);
    }
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
    header.tile_count = vocab->tile_count;
    header.longest_suffix_chain = vocab->longest_suffix_chain;
    header.longest_noncanonical = vocab->longest_noncanonical;
    header.hash_mask = vocab->hash_mask;
    header.decomposition_nodes = vocab->decomposition_nodes;
    header.pool_size = pool_size;
    header.payload_size = at;
    header.checksum = checksum(payload, at);
    memcpy(out, &header, sizeof(header));
    return TKI_OK;
}

int32_t tki_vocab_read_image(const uint8_t *image, uint64_t size, tki_vocab **out_vocab) {
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
        header.payload_size != size - aligned(sizeof(image_header))) {
        return TKI_ERR_ARGUMENT;
    }
    const uint8_t *payload = image + aligned(sizeof(image_header));
    if (checksum(payload, header.payload_size) != header.checksum) {
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
    vocab->tile_count = header.tile_count;
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
