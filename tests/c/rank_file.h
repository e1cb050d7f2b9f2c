/*
 * rank_file.h — owns reading a `.tiktoken` rank file (one "base64 rank" pair
 * per line) into the flat arrays tki_vocab_build takes.  Header-only, shared
 * by tests/c/test_core.c and the fuzz targets in tests/fuzz/.
 */
#ifndef TKI_TEST_RANK_FILE_H
#define TKI_TEST_RANK_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tki_rank_file {
    uint8_t *bytes;    /* all token bytes, laid end to end            */
    uint64_t *offsets; /* count + 1 entries                           */
    uint32_t *ranks;   /* count entries                               */
    uint32_t count;
    uint32_t max_rank;
} tki_rank_file;

static inline void tki_rank_file_free(tki_rank_file *file) {
    free(file->bytes);
    free(file->offsets);
    free(file->ranks);
    memset(file, 0, sizeof(*file));
}

/* Value of a base64 digit, or -1. */
static inline int32_t tki_base64_digit(uint8_t c) {
    if (c >= 'A' && c <= 'Z') {
        return (int32_t)(c - 'A');
    }
    if (c >= 'a' && c <= 'z') {
        return (int32_t)(c - 'a') + 26;
    }
    if (c >= '0' && c <= '9') {
        return (int32_t)(c - '0') + 52;
    }
    if (c == '+') {
        return 62;
    }
    if (c == '/') {
        return 63;
    }
    return -1;
}

/*
 * Decodes text[0..len) (standard alphabet, '=' padding) into out, which must
 * hold len * 3 / 4 + 3 bytes.  Returns the decoded length, or -1.
 */
static inline int64_t tki_base64_decode(const uint8_t *text, size_t len, uint8_t *out) {
    uint32_t accumulator = 0;
    uint32_t bits = 0;
    int64_t used = 0;
    size_t i = 0;
    for (; i < len && text[i] != '='; i++) {
        int32_t digit = tki_base64_digit(text[i]);
        if (digit < 0) {
            return -1;
        }
        accumulator = (accumulator << 6) | (uint32_t)digit;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[used++] = (uint8_t)(accumulator >> bits);
            accumulator &= (1u << bits) - 1u;
        }
    }
    for (; i < len; i++) {
        if (text[i] != '=') {
            return -1;
        }
    }
    return used;
}

/* Reads a whole file; *out must be freed.  Returns 0 on success. */
static inline int tki_read_file(const char *path, uint8_t **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    FILE *stream = fopen(path, "rb");
    if (stream == NULL) {
        return -1;
    }
    size_t capacity = 1u << 16, used = 0;
    uint8_t *data = malloc(capacity);
    if (data == NULL) {
        fclose(stream);
        return -1;
    }
    for (;;) {
        if (used == capacity) {
            uint8_t *grown = realloc(data, capacity * 2);
            if (grown == NULL) {
                free(data);
                fclose(stream);
                return -1;
            }
            data = grown;
            capacity *= 2;
        }
        size_t got = fread(data + used, 1, capacity - used, stream);
        used += got;
        if (got == 0) {
            break;
        }
    }
    int failed = ferror(stream);
    fclose(stream);
    if (failed) {
        free(data);
        return -1;
    }
    *out = data;
    *out_len = used;
    return 0;
}

/*
 * Parses a rank file.  Returns 0 on success; on failure prints why to stderr
 * and returns -1 (file left empty).
 */
static inline int tki_rank_file_load(const char *path, tki_rank_file *file) {
    memset(file, 0, sizeof(*file));
    uint8_t *text = NULL;
    size_t len = 0;
    if (tki_read_file(path, &text, &len) != 0) {
        fprintf(stderr, "cannot read rank file %s\n", path);
        return -1;
    }
    size_t lines = 0;
    for (size_t i = 0; i < len; i++) {
        lines += text[i] == '\n';
    }
    lines += 1;
    if (lines > UINT32_MAX - 1) {
        free(text);
        return -1;
    }
    file->bytes = malloc(len + 4);
    file->offsets = malloc((lines + 1) * sizeof(uint64_t));
    file->ranks = malloc(lines * sizeof(uint32_t));
    if (file->bytes == NULL || file->offsets == NULL || file->ranks == NULL) {
        fprintf(stderr, "out of memory reading %s\n", path);
        free(text);
        tki_rank_file_free(file);
        return -1;
    }
    uint64_t used = 0;
    uint32_t count = 0;
    size_t line_number = 0;
    file->offsets[0] = 0;
    for (size_t start = 0; start < len;) {
        size_t end = start;
        while (end < len && text[end] != '\n') {
            end++;
        }
        line_number++;
        size_t line_end = end;
        if (line_end > start && text[line_end - 1] == '\r') {
            line_end--;
        }
        if (line_end > start) {
            size_t space = start;
            while (space < line_end && text[space] != ' ') {
                space++;
            }
            int64_t decoded = -1;
            uint64_t rank = 0;
            int rank_ok = space + 1 < line_end;
            for (size_t k = space + 1; rank_ok && k < line_end; k++) {
                if (text[k] < '0' || text[k] > '9') {
                    rank_ok = 0;
                } else {
                    rank = rank * 10 + (uint64_t)(text[k] - '0');
                    rank_ok = rank < UINT32_MAX;
                }
            }
            if (rank_ok) {
                decoded = tki_base64_decode(text + start, space - start, file->bytes + used);
            }
            if (decoded < 0) {
                fprintf(stderr, "%s:%zu: malformed line\n", path, line_number);
                free(text);
                tki_rank_file_free(file);
                return -1;
            }
            used += (uint64_t)decoded;
            file->ranks[count] = (uint32_t)rank;
            file->max_rank = (uint32_t)rank > file->max_rank ? (uint32_t)rank : file->max_rank;
            count++;
            file->offsets[count] = used;
        }
        start = end + 1;
    }
    free(text);
    file->count = count;
    return 0;
}

#endif /* TKI_TEST_RANK_FILE_H */
