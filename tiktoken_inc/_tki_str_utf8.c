/*
 * _tki_str_utf8.c: the UTF-8 of a str's characters, made from CPython's own
 * representation of them (PyUnicode_DATA: 1, 2 or 4 bytes a character) with no
 * Python call, so that a thread without the GIL can make it.  For
 * tiktoken_inc/_tki_python.c (included there), whose bounded calls (a long
 * str read only as far as a cap needs) and batches (the documents' UTF-8
 * made on the threads that encode them) use it.  CPython's own conversion
 * (PyUnicode_AsUTF8AndSize) needs the GIL and makes the whole str at once,
 * and it keeps the result in the str for as long as the str lives.
 *
 * A lone surrogate, which has no UTF-8, stops the conversion; the caller then
 * goes back to CPython's way (an error, or the text with its surrogates
 * replaced, as tiktoken makes it).
 */

/* The most UTF-8 bytes a character of a str of this kind makes (1-byte kind: up to U+00FF;
 * 2-byte: up to U+FFFF). */
static inline size_t utf8_most_per_character(int kind)
{
    return kind == PyUnicode_1BYTE_KIND ? 2 : kind == PyUnicode_2BYTE_KIND ? 3 : 4;
}

/* Whether `text`, a str, has UTF-8 that CPython has not made: it is not ASCII (whose
 * characters are their UTF-8) and keeps no UTF-8 (before Python 3.12, a str not
 * "ready" counts as made: CPython's way takes it). */
static int utf8_not_made(PyObject *text)
{
#if PY_VERSION_HEX < 0x030C0000
    if (!PyUnicode_IS_READY(text)) return 0;
#endif
    return !PyUnicode_IS_ASCII(text) && ((PyCompactUnicodeObject *)text)->utf8 == NULL;
}

/* Writes the UTF-8 of c, a code point that is not a surrogate, at out: returns the byte
 * after it. */
static inline uint8_t *code_point_to_utf8(Py_UCS4 c, uint8_t *out)
{
    if (c < 0x80) {
        *out++ = (uint8_t)c;
    } else if (c < 0x800) {
        *out++ = (uint8_t)(0xC0 | (c >> 6));
        *out++ = (uint8_t)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        *out++ = (uint8_t)(0xE0 | (c >> 12));
        *out++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        *out++ = (uint8_t)(0x80 | (c & 0x3F));
    } else {
        *out++ = (uint8_t)(0xF0 | (c >> 18));
        *out++ = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
        *out++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        *out++ = (uint8_t)(0x80 | (c & 0x3F));
    }
    return out;
}

#if defined(__SSE2__) && !defined(TKI_NO_SIMD)
#include <emmintrin.h>
/* Whether no bit of v is set (SSE4.1's ptest, in SSE2). */
static inline int no_bit_set(__m128i v)
{
    return _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_setzero_si128())) == 0xFFFF;
}

/* The UTF-8 of the longest stretch of ASCII characters in groups of 16 at the
 * start of `count` characters (`kind` bytes each) at `bytes`: written to out,
 * returns how many characters (a multiple of 16).  SSE2 narrows 16 characters
 * to 16 bytes with one or two saturating packs, each exact for ASCII. */
static inline size_t ascii_groups_to_utf8(int kind, const uint8_t *bytes, size_t count, uint8_t *out)
{
    size_t i = 0;
    if (kind == PyUnicode_1BYTE_KIND) {
        for (; count - i >= 16; i += 16) {
            __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(bytes + i));
            if (_mm_movemask_epi8(a) != 0) break;
            _mm_storeu_si128((__m128i *)(void *)(out + i), a);
        }
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const __m128i high = _mm_set1_epi16((short)0xFF80);
        for (; count - i >= 16; i += 16) {
            __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(bytes + 2 * i));
            __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(bytes + 2 * i + 16));
            if (!no_bit_set(_mm_and_si128(_mm_or_si128(a, b), high))) break;
            _mm_storeu_si128((__m128i *)(void *)(out + i), _mm_packus_epi16(a, b));
        }
    } else {
        const __m128i high = _mm_set1_epi32((int)0xFFFFFF80u);
        for (; count - i >= 16; i += 16) {
            const uint8_t *at = bytes + 4 * i;
            __m128i a = _mm_loadu_si128((const __m128i *)(const void *)at);
            __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(at + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(at + 32));
            __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(at + 48));
            __m128i any = _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d));
            if (!no_bit_set(_mm_and_si128(any, high))) break;
            __m128i low = _mm_packs_epi32(a, b), upper = _mm_packs_epi32(c, d);
            _mm_storeu_si128((__m128i *)(void *)(out + i), _mm_packus_epi16(low, upper));
        }
    }
    return i;
}
#endif

/*
 * The UTF-8 of characters [from, from + count) of a str's data (`kind` bytes a
 * character) at out: its length, or SIZE_MAX at a lone surrogate.  (Called
 * through characters_to_utf8.)  ASCII goes sixteen characters at a time with
 * SSE2, else eight bytes of characters at a time (8, 4 or 2 of them); a run
 * of three-byte characters in a loop of its own.
 */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((always_inline))
#endif
static inline size_t characters_to_utf8_of(int kind, const void *data, size_t from, size_t count, uint8_t *out)
{
    static const uint64_t non_ascii[5] = {0, 0x8080808080808080u, 0xFF80FF80FF80FF80u, 0, 0xFFFFFF80FFFFFF80u};
    const uint8_t *bytes = (const uint8_t *)data + from * (size_t)kind;
    size_t per_word = 8 / (size_t)kind;
    uint8_t *start = out;
    size_t i = 0;
    while (i < count) {
#if defined(__SSE2__) && !defined(TKI_NO_SIMD)
        if (count - i >= 16 && PyUnicode_READ(kind, bytes, i) < 0x80) {
            size_t ascii = ascii_groups_to_utf8(kind, bytes + i * (size_t)kind, count - i, out);
            out += ascii;
            i += ascii;
            if (i == count) break;
        }
#endif
        uint64_t word;
        if (count - i >= per_word && (memcpy(&word, bytes + i * (size_t)kind, 8), (word & non_ascii[kind]) == 0)) {
            for (size_t j = 0; j < per_word; j++) { /* (the low byte of each character: little or big end) */
                out[j] = (uint8_t)PyUnicode_READ(kind, bytes, i + j);
            }
            out += per_word;
            i += per_word;
            continue;
        }
        Py_UCS4 c = PyUnicode_READ(kind, bytes, i);
        i++;
        if (c < 0x800) {
            out = code_point_to_utf8(c, out);
            continue;
        }
        if (c >= 0xD800 && c <= 0xDFFF) return SIZE_MAX;
        if (c >= 0x10000) {
            out = code_point_to_utf8(c, out);
            continue;
        }
        /* This character and the three-byte ones after it (CJK text) in a loop of their
         * own, without the tests for the other lengths. */
        for (;;) {
            out[0] = (uint8_t)(0xE0 | (c >> 12));
            out[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
            out[2] = (uint8_t)(0x80 | (c & 0x3F));
            out += 3;
            if (i == count) break;
            c = PyUnicode_READ(kind, bytes, i);
            if (c - 0x800u >= 0xD800u - 0x800u && c - 0xE000u >= 0x10000u - 0xE000u) break;
            i++;
        }
    }
    return (size_t)(out - start);
}

/* characters_to_utf8_of made for each kind (the compiler's copy for a constant kind reads
 * each character with one load). */
static size_t characters_to_utf8(int kind, const void *data, size_t from, size_t count, uint8_t *out)
{
    switch (kind) {
    case PyUnicode_1BYTE_KIND: return characters_to_utf8_of(PyUnicode_1BYTE_KIND, data, from, count, out);
    case PyUnicode_2BYTE_KIND: return characters_to_utf8_of(PyUnicode_2BYTE_KIND, data, from, count, out);
    default: return characters_to_utf8_of(PyUnicode_4BYTE_KIND, data, from, count, out);
    }
}
