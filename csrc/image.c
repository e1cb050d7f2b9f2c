/*
 * image.c — a built vocabulary as one flat, checksummed image, so that the
 * tables need not be rebuilt in every process (the caller caches it on disk).
 *
 * Layout: a fixed header (magic, format version, the sizes of the structs,
 * the scalar fields, the payload length and a 64-bit checksum of the
 * payload), then every table in a fixed order, each starting on a 64-byte
 * boundary.  Reading checks the header against this build (every size
 * bounded by the payload before it is multiplied), every table
 * (image_check.c: the checksum is not keyed, so it finds damage, not
 * tampering), and the checksum; any failure is TKI_ERR_ARGUMENT, and the
 * caller rebuilds.  A read image is borrowed: the tables point into the
 * caller's buffer (a read-only mapping of the cache file can be shared
 * between processes), which must outlive the vocabulary.
 *
 * The checksum is a stream over the payload whose sums can be taken table by
 * table and joined, so an image is written as pieces (the header, then each
 * table and its padding) straight from the tables, with no contiguous copy;
 * and a mapped image is checksummed by the checks as they read each table
 * (tki_image_consume), the pages of what they have read released as they go
 * (Linux), so that reading does not make the whole file resident in the
 * process.
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
#define IMAGE_FORMAT 13u
#define IMAGE_ALIGN 64u
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
    uint32_t sparse_ids;     /* 1: the token_id table follows the rules */
    uint32_t moved_count;
    uint32_t watched_count;
    uint32_t properization_rejects;
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

/*
 * The tables in image order; returns how many (7, or 12 for an incremental
 * vocabulary; one more with sparse ids).
 */
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
    if (vocab->sparse_ids) {
        out[n++] = (image_section){(void **)&vocab->token_id, ranks * sizeof(uint32_t)};
    }
    if (vocab->incremental) {
        out[n++] = (image_section){(void **)&vocab->automaton,
                                   (uint64_t)vocab->automaton_blocks * TKI_TILE_WIDTH * sizeof(uint32_t)};
        out[n++] = (image_section){(void **)&vocab->block_keys,
                                   ((uint64_t)vocab->automaton_blocks + 1) * sizeof(uint16_t)};
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
 * show), mixed at the end: memory-bound, about 5 ms for the 80 MB image of
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
static uint64_t checksum_payload(const uint8_t *payload, uint64_t size) {
    checksum_state state;
    memset(&state, 0, sizeof(state));
    checksum_groups(&state, payload, size);
    return checksum_final(&state);
}

/* The sums of two streams one after the other, from the sums of each. */
static void checksum_append(checksum_state *total, const checksum_state *part) {
    uint64_t groups = part->bytes / CHECKSUM_GROUP_BYTES;
    for (int k = 0; k < CHECKSUM_LANES; k++) {
        total->sum_of_sums[k] += part->sum_of_sums[k] + groups * total->sum[k];
        total->sum[k] += part->sum[k];
    }
    total->bytes += part->bytes;
}

/*
 * An image being read: each table's checksum is taken as its check reads it
 * (tki_image_consume), so that the big tables are read once, not once for
 * the checksum and again for the checks; the tables' sums are joined in the
 * image's order at the end (checksum_append), giving the checksum of the
 * whole payload.
 */
#define MAX_SECTIONS 16

struct tki_image_reader {
    size_t count;
    int release_pages;
    const uint8_t *data[MAX_SECTIONS];
    uint64_t size[MAX_SECTIONS];
    uint64_t summed[MAX_SECTIONS];          /* bytes summed so far: whole groups */
    const void *released[MAX_SECTIONS];     /* where the next page release starts */
    checksum_state sum[MAX_SECTIONS];
};

void tki_image_consume(tki_image_reader *reader, const void *table, const void *end) {
    for (size_t i = 0; i < reader->count; i++) {
        if (reader->data[i] != table || table == NULL) {
            continue;
        }
        uint64_t bytes = (uint64_t)((const uint8_t *)end - reader->data[i]);
        bytes = bytes < reader->size[i] ? bytes : reader->size[i];
        bytes = bytes / CHECKSUM_GROUP_BYTES * CHECKSUM_GROUP_BYTES;
        if (bytes > reader->summed[i]) {
            checksum_groups(&reader->sum[i], reader->data[i] + reader->summed[i],
                            bytes - reader->summed[i]);
            reader->summed[i] = bytes;
            if (reader->release_pages) {
                reader->released[i] =
                    tki_image_release_pages(reader->released[i], reader->data[i] + bytes);
            }
        }
        return;
    }
}

/* The checksum of the whole payload: what no check consumed is summed now. */
static uint64_t reader_checksum(tki_image_reader *reader) {
    checksum_state total;
    memset(&total, 0, sizeof(total));
    for (size_t i = 0; i < reader->count; i++) {
        uint64_t rest = reader->size[i] - reader->summed[i];
        checksum_padded(&reader->sum[i], reader->data[i] + reader->summed[i], rest,
                        aligned(reader->size[i]) - reader->size[i]);
        checksum_append(&total, &reader->sum[i]);
    }
    return checksum_final(&total);
}

int32_t tki_vocab_image_size(const tki_vocab *vocab, uint64_t *out_size) {
    if (vocab == NULL || out_size == NULL) {
        return TKI_ERR_ARGUMENT;
    }
    image_section sections[MAX_SECTIONS];
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
    image_section sections[MAX_SECTIONS];
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
    header.special_count = 0; /* an image holds no special tokens (internal.h) */
    header.max_token_bytes = vocab->max_token_bytes;
    header.noncanonical_count = vocab->noncanonical_count;
    header.improper_count = vocab->improper_count;
    header.incremental = vocab->incremental;
    header.state_count = vocab->state_count;
    header.automaton_blocks = vocab->automaton_blocks;
    header.longest_suffix_chain = vocab->longest_suffix_chain;
    header.longest_noncanonical = vocab->longest_noncanonical;
    header.sparse_ids = vocab->sparse_ids;
    header.moved_count = vocab->moved_count;
    header.watched_count = vocab->watched_count;
    header.properization_rejects = vocab->properization_rejects;
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
    image_section sections[MAX_SECTIONS];
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

const void *tki_image_release_pages(const void *from, const void *to) {
#if defined(__linux__) && defined(MADV_DONTNEED)
    long page_size = sysconf(_SC_PAGESIZE);
    if (page_size <= 0) {
        return from;
    }
    uintptr_t page_mask = (uintptr_t)page_size - 1;
    uintptr_t first = ((uintptr_t)from + page_mask) & ~page_mask;
    uintptr_t end = (uintptr_t)to & ~page_mask;
    if (end <= first) {
        return from;
    }
    (void)madvise((void *)first, (size_t)(end - first), MADV_DONTNEED);
    return (const void *)end;
#else
    (void)to;
    return from;
#endif
}

/*
 * Whether a header can be this build's, for an image of `size` bytes: the
 * format, the struct sizes, and every count bounded before it is multiplied
 * (a table cannot be larger than the payload), so that the section sizes
 * computed from it cannot wrap around.
 */
static int header_fits(const image_header *header, uint64_t size) {
    uint64_t payload = size - aligned(sizeof(image_header));
    if (memcmp(header->magic, IMAGE_MAGIC, 8) != 0 || header->format != IMAGE_FORMAT ||
        header->endian_check != 0x01020304u || header->slot_size != sizeof(tki_hash_slot) ||
        header->rule_size != sizeof(tki_token_rule) ||
        header->node_size != sizeof(tki_decomposition_node) ||
        header->payload_size != payload || payload % IMAGE_ALIGN != 0 ||
        payload > UINT64_MAX / 16) {
        return 0;
    }
    if (header->rank_limit == 0 || header->max_token_bytes == 0 || header->incremental > 1 ||
        header->special_count != 0 || header->sparse_ids > 1 ||
        header->pool_size > payload || header->hash_mask >= payload / sizeof(tki_hash_slot) ||
        ((header->hash_mask + 1) & header->hash_mask) != 0 ||
        header->decomposition_nodes > payload / sizeof(tki_decomposition_node)) {
        return 0;
    }
    if (header->incremental) {
        /* Lengths of at most 4096 bytes; the root's row and its 16 tiles at least; tile
         * ids of 24 bits. */
        return header->max_token_bytes <= TKI_MAX_TOKEN_BYTES &&
               header->automaton_blocks > TKI_TILE_WIDTH &&
               header->automaton_blocks < TKI_BLOCK_LIMIT &&
               header->automaton_blocks <= TKI_TILE_ID_MASK && header->state_count > 0 &&
               header->properization_rejects <= header->watched_count;
    }
    return header->automaton_blocks == 0 && header->state_count == 0 &&
           header->decomposition_nodes == 0 && header->longest_suffix_chain == 0 &&
           header->watched_count == 0 && header->properization_rejects == 0;
}

/*
 * The image's vocabulary, its tables in place, once the header, every table
 * (image_check.c) and the checksum have passed; the checks come first, and
 * take the checksum as they read each table (tki_image_consume).  With
 * release_pages, the image is a read-only file mapping: the pages read are
 * dropped from the process as the checks go and at the end.
 */
static int32_t read_image(const uint8_t *image, uint64_t size, int release_pages,
                          tki_vocab **out_vocab) {
    if (image == NULL || out_vocab == NULL || size < aligned(sizeof(image_header)) ||
        ((uintptr_t)image % IMAGE_ALIGN) != 0) {
        return TKI_ERR_ARGUMENT;
    }
    *out_vocab = NULL;
    image_header header;
    memcpy(&header, image, sizeof(header));
    if (!header_fits(&header, size)) {
        return TKI_ERR_ARGUMENT;
    }
    const uint8_t *payload = image + aligned(sizeof(image_header));
    struct tki_vocab *vocab = calloc(1, sizeof(*vocab));
    if (vocab == NULL) {
        return TKI_ERR_NOMEM;
    }
    vocab->borrowed = 1;
    vocab->rank_limit = header.rank_limit;
    vocab->token_count = header.token_count;
    vocab->max_token_bytes = header.max_token_bytes;
    vocab->noncanonical_count = header.noncanonical_count;
    vocab->improper_count = header.improper_count;
    vocab->incremental = header.incremental;
    vocab->state_count = header.state_count;
    vocab->automaton_blocks = header.automaton_blocks;
    vocab->longest_suffix_chain = header.longest_suffix_chain;
    vocab->longest_noncanonical = header.longest_noncanonical;
    vocab->sparse_ids = header.sparse_ids;
    vocab->moved_count = header.moved_count;
    vocab->watched_count = header.watched_count;
    vocab->properization_rejects = header.properization_rejects;
    vocab->hash_mask = header.hash_mask;
    vocab->decomposition_nodes = header.decomposition_nodes;
    image_section sections[MAX_SECTIONS];
    size_t count = list_sections(vocab, header.pool_size, sections);
    int32_t status = payload_size_of(sections, count) == header.payload_size ? TKI_OK
                                                                              : TKI_ERR_ARGUMENT;
    tki_image_reader reader;
    memset(&reader, 0, sizeof(reader));
    reader.count = count;
    reader.release_pages = release_pages;
    uint64_t at = 0;
    for (size_t i = 0; status == TKI_OK && i < count; i++) {
        *sections[i].pointer = (void *)(payload + at);
        reader.data[i] = payload + at;
        reader.size[i] = sections[i].size;
        reader.released[i] = payload + at;
        at += aligned(sections[i].size);
    }
    if (status == TKI_OK) {
        status = tki_image_check(vocab, header.pool_size, &reader);
    }
    if (status == TKI_OK && reader_checksum(&reader) != header.checksum) {
        status = TKI_ERR_ARGUMENT;
    }
    if (release_pages) {
        tki_image_release_pages(payload, payload + header.payload_size);
    }
    if (status != TKI_OK) {
        free(vocab);
        return status;
    }
    *out_vocab = vocab;
    return TKI_OK;
}

int32_t tki_vocab_image_seal(uint8_t *image, uint64_t size) {
    if (image == NULL || size < aligned(sizeof(image_header))) {
        return TKI_ERR_ARGUMENT;
    }
    image_header header;
    memcpy(&header, image, sizeof(header));
    uint64_t payload = size - aligned(sizeof(image_header));
    if (memcmp(header.magic, IMAGE_MAGIC, 8) != 0 || header.format != IMAGE_FORMAT ||
        header.payload_size != payload || payload % IMAGE_ALIGN != 0) {
        return TKI_ERR_ARGUMENT;
    }
    header.checksum = checksum_payload(image + aligned(sizeof(image_header)), payload);
    memcpy(image, &header, sizeof(header));
    return TKI_OK;
}

int32_t tki_vocab_read_image(const uint8_t *image, uint64_t size, tki_vocab **out_vocab) {
    return read_image(image, size, 0, out_vocab);
}

int32_t tki_vocab_read_mapped_image(const uint8_t *image, uint64_t size, tki_vocab **out_vocab) {
    return read_image(image, size, 1, out_vocab);
}
