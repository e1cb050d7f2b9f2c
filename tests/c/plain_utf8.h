/*
 * plain_utf8.h — owns the tests' independent UTF-8 oracle: CPython's decoder
 * rules (no overlong forms, surrogates or code points past U+10FFFF) checked a
 * byte at a time, as plainly as possible, with no code shared with the core.
 * Header-only; used by tests/c/test_core.c, tests/c/test_stream.c and
 * tests/fuzz/fuzz_stream.c.
 */
#ifndef TKI_TEST_PLAIN_UTF8_H
#define TKI_TEST_PLAIN_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The first error of a plain decoder: its offset and reason (1 start, 2 continuation, 3 end), or 0. */
static inline uint32_t plain_utf8_error(const uint8_t *data, size_t len, size_t *offset) {
    size_t i = 0;
    while (i < len) {
        uint8_t b = data[i];
        size_t need = 0;
        uint8_t low = 0x80, high = 0xBF;
        if (b < 0x80) {
            i++;
            continue;
        } else if (b >= 0xC2 && b <= 0xDF) {
            need = 1;
        } else if (b >= 0xE0 && b <= 0xEF) {
            need = 2;
            low = b == 0xE0 ? 0xA0 : 0x80;
            high = b == 0xED ? 0x9F : 0xBF;
        } else if (b >= 0xF0 && b <= 0xF4) {
            need = 3;
            low = b == 0xF0 ? 0x90 : 0x80;
            high = b == 0xF4 ? 0x8F : 0xBF;
        } else {
            *offset = i;
            return 1;
        }
        for (size_t k = 1; k <= need; k++) {
            if (i + k >= len) {
                *offset = i;
                return 3;
            }
            uint8_t c = data[i + k];
            if (c < low || c > high) {
                *offset = i;
                return 2;
            }
            low = 0x80;
            high = 0xBF;
        }
        i += need + 1;
    }
    return 0;
}

#endif
