/*
 * fuzz_common.h — owns what the fuzz targets in tests/fuzz/ share: the check
 * macro (a wrong result aborts, so libFuzzer saves the input like a crash),
 * a reader over the fuzz input, exact-size copies (so that the sanitizers see
 * any read or write past a buffer), and finding the bundled rank files.
 */
#ifndef TKI_FUZZ_COMMON_H
#define TKI_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiktoken_inc.h"
#include "naive_bpe.h"
#include "rank_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(condition, ...)                                                                \
    do {                                                                                          \
        if (!(condition)) {                                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n  ", __FILE__, __LINE__, #condition);      \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fputc('\n', stderr);                                                                  \
            abort();                                                                              \
        }                                                                                         \
    } while (0)

static inline void *fuzz_malloc(size_t size) {
    void *p = malloc(size == 0 ? 1 : size);
    if (p == NULL) {
        fprintf(stderr, "fuzz: out of memory (%zu bytes)\n", size);
        abort();
    }
    return p;
}

static inline void *fuzz_calloc(size_t count, size_t size) {
    void *p = calloc(count == 0 ? 1 : count, size == 0 ? 1 : size);
    if (p == NULL) {
        fprintf(stderr, "fuzz: out of memory (%zu x %zu bytes)\n", count, size);
        abort();
    }
    return p;
}

/* An exact-size heap copy of data[0..size). */
static inline uint8_t *fuzz_copy(const uint8_t *data, size_t size) {
    uint8_t *copy = fuzz_malloc(size);
    if (size > 0) {
        memcpy(copy, data, size);
    }
    return copy;
}

/* Reads the fuzz input front to back; past its end every read gives 0. */
typedef struct fuzz_reader {
    const uint8_t *data;
    size_t size;
    size_t used;
} fuzz_reader;

static inline uint8_t fuzz_byte(fuzz_reader *reader) {
    return reader->used < reader->size ? reader->data[reader->used++] : 0;
}

static inline uint32_t fuzz_u16(fuzz_reader *reader) {
    uint32_t low = fuzz_byte(reader);
    return low | ((uint32_t)fuzz_byte(reader) << 8);
}

/* First index where a and b differ (up to the shorter), or -1 if equal. */
static inline int64_t fuzz_first_difference(const uint32_t *a, size_t na, const uint32_t *b,
                                            size_t nb) {
    size_t n = na < nb ? na : nb;
    for (size_t i = 0; i < n; i++) {
        if (a[i] != b[i]) {
            return (int64_t)i;
        }
    }
    return na == nb ? -1 : (int64_t)n;
}

#define FUZZ_SAME_IDS(a, na, b, nb, what)                                                         \
    do {                                                                                          \
        int64_t diff_ = fuzz_first_difference((a), (na), (b), (nb));                              \
        FUZZ_CHECK(diff_ < 0, "%s: %zu vs %zu ids, first difference at %lld", (what),             \
                   (size_t)(na), (size_t)(nb), (long long)diff_);                                 \
    } while (0)

/* Decodes ids (into an exact-size buffer) and checks that they give want[0..want_len). */
static inline void fuzz_check_round_trip(const tki_vocab *vocab, const uint32_t *ids, size_t count,
                                         const uint8_t *want, size_t want_len, const char *what) {
    size_t total = 0, bad = 0;
    int32_t status = tki_decoded_length(vocab, ids, count, &total, &bad);
    FUZZ_CHECK(status == TKI_OK && total == want_len, "%s: decoded_length status %d, %zu bytes",
               what, (int)status, total);
    uint8_t *bytes = fuzz_malloc(total);
    size_t written = 0;
    status = tki_decode(vocab, ids, count, bytes, total, &written, &bad);
    FUZZ_CHECK(status == TKI_OK && written == want_len &&
                   (want_len == 0 || memcmp(bytes, want, want_len) == 0),
               "%s: decode does not give the input back (status %d)", what, (int)status);
    free(bytes);
}

static inline int fuzz_file_exists(const char *path) {
    FILE *stream = fopen(path, "rb");
    if (stream == NULL) {
        return 0;
    }
    fclose(stream);
    return 1;
}

/*
 * Path of a bundled rank file ("cl100k_base.tiktoken") written to out: from
 * $TKI_RANKS_DIR, else tiktoken_inc/ranks/ in the current directory or in a
 * parent of the executable's directory.  Returns 0 when found.
 */
static inline int fuzz_find_rank_file(const char *file_name, const char *argv0, char *out,
                                      size_t out_size) {
    const char *env = getenv("TKI_RANKS_DIR");
    if (env != NULL && env[0] != '\0') {
        snprintf(out, out_size, "%s/%s", env, file_name);
        if (fuzz_file_exists(out)) {
            return 0;
        }
    }
    snprintf(out, out_size, "tiktoken_inc/ranks/%s", file_name);
    if (fuzz_file_exists(out)) {
        return 0;
    }
    if (argv0 != NULL) {
        char base[4096];
        snprintf(base, sizeof(base), "%s", argv0);
        for (int up = 0; up < 8; up++) {
            char *slash = strrchr(base, '/');
            if (slash == NULL) {
                break;
            }
            *slash = '\0';
            snprintf(out, out_size, "%s/tiktoken_inc/ranks/%s", base[0] ? base : "/", file_name);
            if (fuzz_file_exists(out)) {
                return 0;
            }
        }
    }
    return -1;
}

/* Builds a vocabulary from a bundled rank file (with <|endoftext|> after its last rank). */
static inline tki_vocab *fuzz_load_vocab(const char *file_name, const char *argv0) {
    char path[4200];
    if (fuzz_find_rank_file(file_name, argv0, path, sizeof(path)) != 0) {
        fprintf(stderr, "fuzz: cannot find %s (set TKI_RANKS_DIR)\n", file_name);
        abort();
    }
    tki_rank_file file;
    if (tki_rank_file_load(path, &file) != 0) {
        abort();
    }
    static const char special[] = "<|endoftext|>";
    uint64_t special_offsets[2] = {0, sizeof(special) - 1};
    uint32_t special_rank = file.max_rank + 1;
    tki_vocab *vocab = NULL;
    uint32_t error_index = 0;
    int32_t status = tki_vocab_build(file.bytes, file.offsets, file.ranks, file.count,
                                     (const uint8_t *)special, special_offsets, &special_rank, 1,
                                     &vocab, &error_index);
    tki_rank_file_free(&file);
    FUZZ_CHECK(status == TKI_OK, "building %s: status %d at %u", path, (int)status, error_index);
    return vocab;
}

#endif /* TKI_FUZZ_COMMON_H */
