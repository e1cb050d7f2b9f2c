/*
 * test_core.c — owns the standalone C tests of the core in csrc/ (no Python):
 * it is compiled directly with the csrc/ sources and checks the public API of
 * tiktoken_inc.h against its own methods and an independent oracle
 * (naive_bpe.h):
 *   (a) tki_encode_pieces: centroid (default) == TKI_METHOD_LINEAR ==
 *       TKI_METHOD_HEAP on whole inputs (shortcut off; and with it on), and
 *       the naive oracle on short inputs;
 *   (b) tki_prefix_last_tokens: centroid == linear on every prefix, and equal
 *       to the last token of the heap BPE of each prefix of short inputs;
 *   (c) tki_encode_text: decodes back to its input, equals tki_pretokenize's
 *       pieces encoded by tki_encode_pieces with the shortcut, whatever the
 *       method flag, with the right last-piece token count;
 *   (d) small random vocabularies (and small trained ones): every method ==
 *       the naive oracle on every string up to length 8 over the alphabet,
 *       whatever `incremental` says, and noncanonical/improper counts as
 *       docs/algorithm.md section 2 defines them (every one incremental: improper
 *       vocabularies are properized, csrc/properize.c, and none of the
 *       properization's checks fails);
 *   (e) error paths: each returns its status, never crashes.
 *
 * Usage: test_core [--seed N] [--quick] [--text FILE]... [--crash-cases]
 *                  [--alloc-failures-only] [RANK_FILE.tiktoken ...]
 * Without rank files it uses tiktoken_inc/ranks/{r50k,cl100k}_base.tiktoken
 * under the current directory.  The error-path inputs that once crashed the
 * core (see crash_cases()) always run; --crash-cases is kept as a no-op.  Built with -DTKI_TEST_ALLOC_FAILURES
 * (and the linker's --wrap, see .ci/sanitize.sh) it first fails each
 * allocation of the core in turn (--alloc-failures-only: nothing else).
 * Closes with "N passed, M failed";
 * exits 1 on any failure, 2 on a setup error.
 */
#define _DEFAULT_SOURCE /* fileno, mmap: the image of a file mapping (check_images) */

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "tiktoken_inc.h"
#include "pretokenize_tables.h"
#include "token_hash.h" /* the slot of a key, to make collisions on purpose */
#include "pretokenize_block.h" /* the windows' lookups, checked against the class tables */
#include "naive_bpe.h"
#include "plain_utf8.h"
#include "rank_file.h"

/* ------------------------------------------------------------------ reporting */

static uint64_t g_passed = 0;
static uint64_t g_failed = 0;
static char g_case[256];
static int g_case_open = 0;
static uint32_t g_case_failures = 0;
static uint32_t g_printed = 0;
enum { MAX_PRINTED_PER_CASE = 4, MAX_PRINTED = 200 };

static void case_begin(const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(g_case, sizeof(g_case), format, args);
    va_end(args);
    g_case_open = 1;
    g_case_failures = 0;
}

static void case_end(void) {
    if (!g_case_open) {
        return;
    }
    if (g_case_failures == 0) {
        g_passed++;
    } else {
        g_failed++;
    }
    g_case_open = 0;
}

static void fail_at(int line, const char *format, ...) {
    g_case_failures++;
    if (g_case_failures > MAX_PRINTED_PER_CASE || g_printed >= MAX_PRINTED) {
        return;
    }
    g_printed++;
    fprintf(stdout, "FAIL [%s] (test_core.c:%d): ", g_case, line);
    va_list args;
    va_start(args, format);
    vfprintf(stdout, format, args);
    va_end(args);
    fputc('\n', stdout);
    fflush(stdout);
}

#define CHECK(condition, ...)                                                                     \
    do {                                                                                          \
        if (!(condition)) {                                                                       \
            fail_at(__LINE__, __VA_ARGS__);                                                       \
        }                                                                                         \
    } while (0)

#define CHECK_STATUS(got, want, what)                                                             \
    do {                                                                                          \
        int32_t got_status_ = (got);                                                              \
        CHECK(got_status_ == (want), "%s: status %d (%s), want %d", (what), (int)got_status_,    \
              tki_status_message(got_status_), (int)(want));                                     \
    } while (0)

/* What the sixteen two-byte code points from `first` are for the windows when all are alike
 * (tki_two_byte_groups, the rule of csrc/gen_unicode_tables.py): TKI_GROUP_*, else 0. */
static uint32_t two_byte_group_code(uint32_t first, uint32_t o200k) {
    uint32_t code = 0;
    for (uint32_t cp = first; cp < first + 16; cp++) {
        const uint32_t klass = tki_unicode_class(cp);
        if (cp < 0x80 || cp == 0x17F || (klass & TKI_CLASS_LETTER) == 0) {
            return 0;
        }
        const uint32_t this_code = !o200k ? TKI_GROUP_LETTER
                                   : (klass & TKI_CLASS_LOWER_LIKE) == 0 ? TKI_GROUP_CAPITAL
                                   : (klass & TKI_CLASS_UPPER_LIKE) != 0 ? TKI_GROUP_BOTH
                                                                          : TKI_GROUP_LETTER;
        if (code != 0 && this_code != code) {
            return 0;
        }
        code = this_code;
    }
    return code;
}

static void *checked_malloc(size_t size) {
    void *p = malloc(size == 0 ? 1 : size);
    if (p == NULL) {
        fprintf(stderr, "test_core: out of memory (%zu bytes)\n", size);
        exit(2);
    }
    return p;
}

static void *checked_calloc(size_t count, size_t size) {
    void *p = calloc(count == 0 ? 1 : count, size == 0 ? 1 : size);
    if (p == NULL) {
        fprintf(stderr, "test_core: out of memory (%zu x %zu bytes)\n", count, size);
        exit(2);
    }
    return p;
}

/* ------------------------------------------------------------------ random */

static uint64_t g_rng = 0;

static uint64_t next_random(void) {
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound), bound > 0. */
static uint32_t random_below(uint32_t bound) {
    return (uint32_t)(next_random() % bound);
}

static void shuffle_u32(uint32_t *values, uint32_t count) {
    for (uint32_t i = count; i > 1; i--) {
        uint32_t j = random_below(i);
        uint32_t swap = values[i - 1];
        values[i - 1] = values[j];
        values[j] = swap;
    }
}

/* ------------------------------------------------------------------ helpers */

/* First index where a and b differ (up to the shorter), or -1 if equal. */
static int64_t first_difference(const uint32_t *a, size_t na, const uint32_t *b, size_t nb) {
    size_t n = na < nb ? na : nb;
    for (size_t i = 0; i < n; i++) {
        if (a[i] != b[i]) {
            return (int64_t)i;
        }
    }
    return na == nb ? -1 : (int64_t)n;
}

static uint32_t at_or_none(const uint32_t *a, size_t n, int64_t i) {
    return i >= 0 && (size_t)i < n ? a[i] : UINT32_MAX;
}

#define CHECK_SAME_IDS(a, na, b, nb, what)                                                        \
    do {                                                                                          \
        int64_t diff_ = first_difference((a), (na), (b), (nb));                                   \
        CHECK(diff_ < 0, "%s: %zu vs %zu ids, first difference at %lld: %u vs %u", (what),       \
              (size_t)(na), (size_t)(nb), (long long)diff_, at_or_none((a), (na), diff_),          \
              at_or_none((b), (nb), diff_));                                                      \
    } while (0)

static uint32_t core_lookup(const void *context, const uint8_t *data, size_t len) {
    uint32_t rank = 0;
    return tki_token_rank((const tki_vocab *)context, data, len, &rank) == TKI_OK ? rank
                                                                                 : NAIVE_NONE;
}

/* Encodes data as one piece with `flags`; *out (exactly len entries) must be freed. */
static int32_t encode_whole(const tki_vocab *vocab, const uint8_t *data, size_t len,
                            uint32_t flags, uint32_t **out, size_t *count) {
    size_t end = len;
    *out = checked_malloc(len * sizeof(uint32_t));
    *count = 0;
    return tki_encode_pieces(vocab, data, len, &end, len > 0 ? 1 : 0, flags, *out, len, count);
}

/* Decodes ids into an exactly sized buffer and compares with want[0..want_len). */
static void check_decodes_to(const tki_vocab *vocab, const uint32_t *ids, size_t count,
                             const uint8_t *want, size_t want_len, const char *what) {
    size_t total = 0, bad = 0;
    int32_t status = tki_decoded_length(vocab, ids, count, &total, &bad);
    CHECK_STATUS(status, TKI_OK, "tki_decoded_length");
    if (status != TKI_OK) {
        return;
    }
    CHECK(total == want_len, "%s: decoded length %zu, want %zu", what, total, want_len);
    uint8_t *bytes = checked_malloc(total);
    size_t written = 0;
    status = tki_decode(vocab, ids, count, bytes, total, &written, &bad);
    CHECK_STATUS(status, TKI_OK, "tki_decode");
    if (status == TKI_OK) {
        CHECK(written == want_len && (want_len == 0 || memcmp(bytes, want, want_len) == 0),
              "%s: decode does not give the input back", what);
    }
    free(bytes);
}

/* ------------------------------------------------------------------ big vocabularies */

typedef struct big_vocab {
    const char *path;
    char name[64];
    tki_rank_file file;
    tki_vocab *vocab;
    uint32_t special_rank;
} big_vocab;

static const char SPECIAL_TEXT[] = "<|endoftext|>";

static int big_vocab_load(big_vocab *big, const char *path) {
    memset(big, 0, sizeof(*big));
    big->path = path;
    const char *base = strrchr(path, '/');
    snprintf(big->name, sizeof(big->name), "%s", base != NULL ? base + 1 : path);
    char *dot = strchr(big->name, '.');
    if (dot != NULL) {
        *dot = '\0';
    }
    if (tki_rank_file_load(path, &big->file) != 0) {
        return -1;
    }
    big->special_rank = big->file.max_rank + 1;
    uint64_t special_offsets[2] = {0, sizeof(SPECIAL_TEXT) - 1};
    clock_t start = clock();
    uint32_t error_index = 0;
    int32_t status = tki_vocab_build(big->file.bytes, big->file.offsets, big->file.ranks,
                                     big->file.count, (const uint8_t *)SPECIAL_TEXT,
                                     special_offsets, &big->special_rank, 1, &big->vocab,
                                     &error_index);
    case_begin("%s: build", big->name);
    CHECK_STATUS(status, TKI_OK, "tki_vocab_build");
    case_end();
    if (status != TKI_OK) {
        fprintf(stdout, "  (error index %u)\n", error_index);
        return -1;
    }
    fprintf(stdout, "%s: %u tokens, built in %.2f s\n", big->name, big->file.count,
            (double)(clock() - start) / CLOCKS_PER_SEC);
    return 0;
}

static void big_vocab_free(big_vocab *big) {
    tki_vocab_free(big->vocab);
    tki_rank_file_free(&big->file);
}

/* The table as given: info, every token's rank and bytes, the special token. */
static void check_big_tables(const big_vocab *big) {
    const tki_vocab *vocab = big->vocab;
    tki_vocab_info info;
    tki_vocab_get_info(vocab, &info);
    case_begin("%s: info", big->name);
    CHECK(info.token_count == big->file.count, "token_count %u", info.token_count);
    CHECK(info.special_count == 1, "special_count %u", info.special_count);
    CHECK(info.max_rank == big->special_rank, "max_rank %u", info.max_rank);
    CHECK(info.incremental == 1, "incremental %u (the OpenAI files are proper)", info.incremental);
    CHECK(info.improper_count == 0, "improper_count %u", info.improper_count);
    CHECK(info.noncanonical_count == 0, "noncanonical_count %u", info.noncanonical_count);
    CHECK(info.max_token_bytes >= 2 && info.max_token_bytes <= TKI_MAX_TOKEN_BYTES,
          "max_token_bytes %u", info.max_token_bytes);
    CHECK(info.memory_bytes > 0 && info.automaton_states > 0, "memory/automaton empty");
    case_end();

    case_begin("%s: every token's rank and bytes", big->name);
    uint32_t longest = 0;
    for (uint32_t i = 0; i < big->file.count; i++) {
        const uint8_t *bytes = big->file.bytes + big->file.offsets[i];
        size_t len = (size_t)(big->file.offsets[i + 1] - big->file.offsets[i]);
        longest = len > longest ? (uint32_t)len : longest;
        uint32_t rank = UINT32_MAX;
        CHECK_STATUS(tki_token_rank(vocab, bytes, len, &rank), TKI_OK, "tki_token_rank");
        CHECK(rank == big->file.ranks[i], "token %u: rank %u, want %u", i, rank,
              big->file.ranks[i]);
        const uint8_t *got = NULL;
        size_t got_len = 0;
        CHECK_STATUS(tki_token_bytes(vocab, big->file.ranks[i], &got, &got_len), TKI_OK,
                     "tki_token_bytes");
        CHECK(got != NULL && got_len == len && memcmp(got, bytes, len) == 0,
              "rank %u: wrong bytes", big->file.ranks[i]);
    }
    CHECK(longest == info.max_token_bytes, "max_token_bytes %u, longest %u",
          info.max_token_bytes, longest);
    const uint8_t *special = NULL;
    size_t special_len = 0;
    CHECK_STATUS(tki_token_bytes(vocab, big->special_rank, &special, &special_len), TKI_OK,
                 "special bytes");
    CHECK(special_len == sizeof(SPECIAL_TEXT) - 1 &&
              memcmp(special, SPECIAL_TEXT, special_len) == 0,
          "special bytes differ");
    uint32_t rank = 0;
    CHECK_STATUS(tki_token_rank(vocab, (const uint8_t *)SPECIAL_TEXT, sizeof(SPECIAL_TEXT) - 1,
                                &rank),
                 TKI_ERR_UNKNOWN_TOKEN, "a special token is no mergeable token");
    uint32_t with_special[3] = {big->file.ranks[0], big->special_rank, big->file.ranks[0]};
    size_t total = 0, bad = 0;
    CHECK_STATUS(tki_decoded_length(vocab, with_special, 3, &total, &bad), TKI_OK,
                 "decoded_length with a special");
    CHECK(total == 2 * (big->file.offsets[1] - big->file.offsets[0]) + special_len,
          "decoded_length with a special: %zu", total);
    case_end();
}

enum {
    NAIVE_MAX = 256,         /* inputs up to this long are also checked against naive_bpe */
    PREFIX_ORACLE_MAX = 96   /* ... and every prefix of inputs this long against the heap  */
};

/* (c) for one pattern: tki_encode_text against tki_pretokenize + tki_encode_pieces. */
static void check_encode_text(const tki_vocab *vocab, int32_t pattern, const uint8_t *data,
                              size_t len) {
    size_t cap = len;
    uint32_t *text_ids[3];
    size_t text_count[3] = {0, 0, 0}, last_piece[3] = {0, 0, 0};
    static const uint32_t methods[3] = {0, TKI_METHOD_LINEAR, TKI_METHOD_HEAP};
    for (int m = 0; m < 3; m++) {
        text_ids[m] = checked_malloc(cap * sizeof(uint32_t));
        last_piece[m] = SIZE_MAX;
        int32_t status = tki_encode_text(vocab, pattern, data, len, methods[m], text_ids[m], cap,
                                         &text_count[m], &last_piece[m]);
        CHECK_STATUS(status, TKI_OK, "tki_encode_text");
    }
    CHECK_SAME_IDS(text_ids[0], text_count[0], text_ids[1], text_count[1],
                   "encode_text default vs linear");
    CHECK_SAME_IDS(text_ids[0], text_count[0], text_ids[2], text_count[2],
                   "encode_text default vs heap");
    CHECK(last_piece[0] == last_piece[1] && last_piece[0] == last_piece[2],
          "last-piece counts differ by method: %zu %zu %zu", last_piece[0], last_piece[1],
          last_piece[2]);
    check_decodes_to(vocab, text_ids[0], text_count[0], data, len, "encode_text");

    size_t *ends = checked_malloc(cap * sizeof(size_t));
    size_t pieces = 0;
    int32_t status = tki_pretokenize(pattern, data, len, ends, cap, &pieces);
    CHECK_STATUS(status, TKI_OK, "tki_pretokenize");
    if (status == TKI_OK) {
        int ascending = pieces > 0 || len == 0;
        for (size_t k = 0; k < pieces; k++) {
            ascending &= ends[k] > (k == 0 ? 0 : ends[k - 1]);
        }
        CHECK(ascending && (pieces == 0 ? len == 0 : ends[pieces - 1] == len),
              "pretokenize pieces are not ascending or do not cover the input");
        uint32_t *piece_ids = checked_malloc(cap * sizeof(uint32_t));
        size_t piece_count = 0;
        status = tki_encode_pieces(vocab, data, len, ends, pieces, TKI_WHOLE_PIECE_SHORTCUT,
                                   piece_ids, cap, &piece_count);
        CHECK_STATUS(status, TKI_OK, "tki_encode_pieces of the pieces");
        CHECK_SAME_IDS(text_ids[0], text_count[0], piece_ids, piece_count,
                       "encode_text vs pretokenize + encode_pieces");
        if (pieces > 0) {
            size_t start = pieces > 1 ? ends[pieces - 2] : 0;
            size_t piece_len = len - start;
            size_t one_end = piece_len, one_count = 0;
            status = tki_encode_pieces(vocab, data + start, piece_len, &one_end, 1,
                                       TKI_WHOLE_PIECE_SHORTCUT, piece_ids, cap, &one_count);
            CHECK_STATUS(status, TKI_OK, "tki_encode_pieces of the last piece");
            CHECK(one_count == last_piece[0], "last piece: %zu tokens, encode_text says %zu",
                  one_count, last_piece[0]);
        } else {
            CHECK(last_piece[0] == 0, "empty text: last piece %zu tokens", last_piece[0]);
        }
        free(piece_ids);
    }
    free(ends);
    for (int m = 0; m < 3; m++) {
        free(text_ids[m]);
    }
}

/* (a), (b), (c) on one input. */
static void check_input(const tki_vocab *vocab, const uint8_t *data, size_t len, int incremental) {
    uint32_t *ids[3];
    size_t count[3];
    static const uint32_t methods[3] = {0, TKI_METHOD_LINEAR, TKI_METHOD_HEAP};
    static const char *const names[3] = {"default", "linear", "heap"};
    for (int m = 0; m < 3; m++) {
        int32_t status = encode_whole(vocab, data, len, methods[m], &ids[m], &count[m]);
        CHECK(status == TKI_OK, "encode_pieces %s: status %d", names[m], (int)status);
    }
    CHECK_SAME_IDS(ids[0], count[0], ids[2], count[2], "encode_pieces default vs heap");
    CHECK_SAME_IDS(ids[1], count[1], ids[2], count[2], "encode_pieces linear vs heap");
    check_decodes_to(vocab, ids[0], count[0], data, len, "encode_pieces default");

    /* With the whole-piece shortcut. */
    uint32_t *cut_default = NULL, *cut_heap = NULL;
    size_t cut_default_count = 0, cut_heap_count = 0;
    int32_t status = encode_whole(vocab, data, len, TKI_WHOLE_PIECE_SHORTCUT, &cut_default,
                                  &cut_default_count);
    CHECK_STATUS(status, TKI_OK, "encode_pieces shortcut");
    status = encode_whole(vocab, data, len, TKI_WHOLE_PIECE_SHORTCUT | TKI_METHOD_HEAP,
                          &cut_heap, &cut_heap_count);
    CHECK_STATUS(status, TKI_OK, "encode_pieces shortcut heap");
    CHECK_SAME_IDS(cut_default, cut_default_count, cut_heap, cut_heap_count,
                   "encode_pieces shortcut default vs heap");
    uint32_t whole_rank = core_lookup(vocab, data, len);
    if (whole_rank != NAIVE_NONE) {
        CHECK(cut_default_count == 1 && cut_default[0] == whole_rank,
              "shortcut: the input is token %u but encodes to %zu ids", whole_rank,
              cut_default_count);
    } else {
        CHECK_SAME_IDS(cut_default, cut_default_count, ids[2], count[2],
                       "encode_pieces shortcut (no token) vs plain");
    }
    free(cut_default);
    free(cut_heap);

    /* The independent oracle on short inputs. */
    if (len > 0 && len <= NAIVE_MAX) {
        size_t *starts = checked_malloc((len + 1) * sizeof(size_t));
        uint32_t *naive = checked_malloc(len * sizeof(uint32_t));
        size_t naive_count = naive_bpe(core_lookup, vocab, data, len, starts, naive, NULL);
        CHECK_SAME_IDS(ids[2], count[2], naive, naive_count, "encode_pieces heap vs naive");
        free(starts);
        free(naive);
    }

    /* (b) every prefix. */
    if (incremental && len > 0) {
        uint32_t *prefix_default = checked_malloc(len * sizeof(uint32_t));
        uint32_t *prefix_linear = checked_malloc(len * sizeof(uint32_t));
        CHECK_STATUS(tki_prefix_last_tokens(vocab, data, len, 0, prefix_default), TKI_OK,
                     "prefix_last_tokens default");
        CHECK_STATUS(tki_prefix_last_tokens(vocab, data, len, TKI_METHOD_LINEAR, prefix_linear),
                     TKI_OK, "prefix_last_tokens linear");
        CHECK_SAME_IDS(prefix_default, len, prefix_linear, len,
                       "prefix_last_tokens default vs linear");
        /* Read backwards, the prefix tokens give the whole input's BPE. */
        size_t back = count[2], end = len;
        int consistent = 1;
        while (consistent && end > 0) {
            uint32_t token = prefix_default[end - 1];
            const uint8_t *bytes = NULL;
            size_t token_len = 0;
            consistent = back > 0 && ids[2][back - 1] == token &&
                         tki_token_bytes(vocab, token, &bytes, &token_len) == TKI_OK &&
                         token_len > 0 && token_len <= end &&
                         memcmp(bytes, data + end - token_len, token_len) == 0;
            end -= consistent ? token_len : 0;
            back -= consistent ? 1 : 0;
        }
        CHECK(consistent && back == 0, "prefix tokens read backwards differ from the BPE");
        if (len <= PREFIX_ORACLE_MAX) {
            uint32_t *heap_ids = checked_malloc(len * sizeof(uint32_t));
            for (size_t i = 1; i <= len; i++) {
                size_t one_end = i, heap_count = 0;
                status = tki_encode_pieces(vocab, data, i, &one_end, 1, TKI_METHOD_HEAP, heap_ids,
                                           i, &heap_count);
                CHECK(status == TKI_OK && heap_count > 0 &&
                          heap_ids[heap_count - 1] == prefix_default[i - 1],
                      "prefix %zu: last token %u, heap says %u", i, prefix_default[i - 1],
                      heap_count > 0 ? heap_ids[heap_count - 1] : UINT32_MAX);
            }
            free(heap_ids);
        }
        free(prefix_default);
        free(prefix_linear);
    }
    for (int m = 0; m < 3; m++) {
        free(ids[m]);
    }

    /* (c) */
    for (int32_t pattern = TKI_PATTERN_R50K; pattern <= TKI_PATTERN_O200K; pattern++) {
        check_encode_text(vocab, pattern, data, len);
    }
}

/* Appends a character's UTF-8 bytes `repeat` times. */
static size_t make_run(uint8_t *out, const char *unit, size_t repeat) {
    size_t unit_len = strlen(unit), used = 0;
    if (unit_len == 0) {
        unit_len = 1; /* the NUL byte itself */
    }
    for (size_t i = 0; i < repeat; i++) {
        memcpy(out + used, unit, unit_len);
        used += unit_len;
    }
    return used;
}

static void run_big_tests(const big_vocab *big, int quick) {
    const tki_vocab *vocab = big->vocab;
    tki_vocab_info info;
    tki_vocab_get_info(vocab, &info);
    check_big_tables(big);

    /* Runs of one byte or character. */
    static const char *const units[] = {" ", "a", "0", "\n", "\t", "!", "", "\xff", "\xc3\xa9",
                                        "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\r\n", "ab"};
    static const char *const unit_names[] = {"space", "a", "0", "LF", "tab", "!", "NUL", "0xff",
                                             "e-acute", "CJK", "emoji", "CRLF", "ab"};
    static const size_t long_lengths[] = {63,  64,   65,   127,  128,  129,  255,  256,
                                          257, 1000, 1024, 4095, 4096, 4097, 20000};
    uint8_t *buffer = checked_malloc(20000 * 4);
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
        case_begin("%s: runs of %s", big->name, unit_names[u]);
        for (size_t n = 1; n <= 48; n++) {
            check_input(vocab, buffer, make_run(buffer, units[u], n), info.incremental);
        }
        size_t lengths = sizeof(long_lengths) / sizeof(long_lengths[0]);
        for (size_t k = 0; k < lengths; k++) {
            size_t n = long_lengths[k];
            if (quick && n > 1024) {
                continue;
            }
            if (strlen(units[u]) > 1 && n > 8192) {
                n = 8192; /* keep the multi-byte runs near 20,000 bytes */
            }
            check_input(vocab, buffer, make_run(buffer, units[u], n), info.incremental);
        }
        case_end();
    }

    /* Random bytes from several sources. */
    static const char *const sources[] = {"uniform bytes", "few bytes", "ascii text",
                                          "utf-8 code points"};
    for (int source = 0; source < 4; source++) {
        case_begin("%s: random %s", big->name, sources[source]);
        int inputs = quick ? 8 : 24;
        for (int t = 0; t < inputs; t++) {
            size_t len = 1 + random_below(t % 4 == 0 ? 3000 : 200);
            size_t used = 0;
            while (used < len) {
                uint32_t r = (uint32_t)next_random();
                if (source == 0) {
                    buffer[used++] = (uint8_t)r;
                } else if (source == 1) {
                    static const uint8_t few[] = {' ', 'a', 'b', 'e', '\n', 0xe4, 0xb8};
                    buffer[used++] = few[r % sizeof(few)];
                } else if (source == 2) {
                    static const char ascii[] =
                        "etaoin shrdlu ETAOIN SHRDLU 0123456789 .,;:!?'\"()[]{}<>\n\t-_=+*/\\'s";
                    buffer[used++] = (uint8_t)ascii[r % (sizeof(ascii) - 1)];
                } else {
                    uint32_t cp = r % 4 == 0 ? 0x80 + (r >> 8) % 0x780
                                : r % 4 == 1 ? 0x800 + (r >> 8) % 0xF800
                                : r % 4 == 2 ? 0x10000 + (r >> 8) % 0x100000
                                             : 0x20 + (r >> 8) % 0x60;
                    if (cp >= 0xD800 && cp <= 0xDFFF) {
                        cp = 'x';
                    }
                    if (cp < 0x80) {
                        buffer[used++] = (uint8_t)cp;
                    } else if (cp < 0x800) {
                        buffer[used++] = (uint8_t)(0xC0 | (cp >> 6));
                        buffer[used++] = (uint8_t)(0x80 | (cp & 0x3F));
                    } else if (cp < 0x10000) {
                        buffer[used++] = (uint8_t)(0xE0 | (cp >> 12));
                        buffer[used++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                        buffer[used++] = (uint8_t)(0x80 | (cp & 0x3F));
                    } else {
                        buffer[used++] = (uint8_t)(0xF0 | (cp >> 18));
                        buffer[used++] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
                        buffer[used++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                        buffer[used++] = (uint8_t)(0x80 | (cp & 0x3F));
                    }
                }
            }
            check_input(vocab, buffer, used, info.incremental);
        }
        case_end();
    }

    /* Random concatenations of tokens (from the whole file, and from a few tokens). */
    for (int pool_kind = 0; pool_kind < 2; pool_kind++) {
        case_begin("%s: random concatenations of %s", big->name,
                   pool_kind == 0 ? "tokens" : "a few tokens");
        int inputs = quick ? 10 : 40;
        for (int t = 0; t < inputs; t++) {
            uint32_t few[4];
            for (int k = 0; k < 4; k++) {
                few[k] = random_below(big->file.count);
            }
            size_t tokens = 1 + random_below(t % 5 == 0 ? 2000 : 60), used = 0;
            for (size_t k = 0; k < tokens; k++) {
                uint32_t i = pool_kind == 0 ? random_below(big->file.count) : few[random_below(4)];
                size_t token_len = (size_t)(big->file.offsets[i + 1] - big->file.offsets[i]);
                if (used + token_len > 20000 * 4) {
                    break;
                }
                memcpy(buffer + used, big->file.bytes + big->file.offsets[i], token_len);
                used += token_len;
            }
            check_input(vocab, buffer, used, info.incremental);
        }
        case_end();
    }

    /* Inputs that caught mistakes before (docs/algorithm.md section 12), and some edge text. */
    static const char *const fixed[] = {
        " @param", "\"\"\"", "\"\"", "\"", " they're", " they'r", "don't", "don'", "<|endoftext|>",
        "Hello, world!\n", "  \n\n  \t x", "'s'S'll'LL'ſ", "1234567890123",
        "\xe4\xb8\xad\xe6\x96\x87 text \xf0\x9f\x98\x80\xf0\x9f\x98\x80",
        "\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x28\x8c\xbc\xed\xa0\x80\xc0\xaf",
        "def f(x):\r\n    return x  \r\n", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xe2\x80\x8b"};
    case_begin("%s: fixed inputs", big->name);
    for (size_t k = 0; k < sizeof(fixed) / sizeof(fixed[0]); k++) {
        check_input(vocab, (const uint8_t *)fixed[k], strlen(fixed[k]), info.incremental);
    }
    case_end();
    free(buffer);
}

static void run_text_file(const big_vocab *big, const char *path) {
    uint8_t *data = NULL;
    size_t len = 0;
    case_begin("%s: text %s", big->name, path);
    if (tki_read_file(path, &data, &len) != 0) {
        CHECK(0, "cannot read %s", path);
    } else {
        tki_vocab_info info;
        tki_vocab_get_info(big->vocab, &info);
        check_input(big->vocab, data, len, info.incremental);
    }
    free(data);
    case_end();
}

/* ------------------------------------------------------------------ small vocabularies */

enum { LISTED_MAX_TOKENS = 600, LISTED_MAX_LEN = 64, LISTED_SLOTS = 2048 };

/* A vocabulary the test knows by heart: 256 bytes plus `count` multi-byte tokens. */
typedef struct listed_vocab {
    uint32_t byte_rank[256];
    uint32_t count;
    uint8_t token[LISTED_MAX_TOKENS][LISTED_MAX_LEN];
    uint32_t token_len[LISTED_MAX_TOKENS];
    uint32_t token_rank[LISTED_MAX_TOKENS];
    uint32_t slot[LISTED_SLOTS]; /* index + 1 of a multi-byte token, by hash; 0: empty */
} listed_vocab;

static uint32_t listed_hash(const uint8_t *data, size_t len) {
    uint32_t hash = 2166136261u ^ (uint32_t)len;
    for (size_t i = 0; i < len; i++) {
        hash = (hash ^ data[i]) * 16777619u;
    }
    return hash & (LISTED_SLOTS - 1);
}

static uint32_t listed_lookup(const void *context, const uint8_t *data, size_t len) {
    const listed_vocab *listed = context;
    if (len == 1) {
        return listed->byte_rank[data[0]];
    }
    if (len > LISTED_MAX_LEN) {
        return NAIVE_NONE;
    }
    for (uint32_t slot = listed_hash(data, len); listed->slot[slot] != 0;
         slot = (slot + 1) & (LISTED_SLOTS - 1)) {
        uint32_t i = listed->slot[slot] - 1;
        if (listed->token_len[i] == len && memcmp(listed->token[i], data, len) == 0) {
            return listed->token_rank[i];
        }
    }
    return NAIVE_NONE;
}

/* Adds a multi-byte token (not yet present) with rank 0; the caller sets the rank. */
static void listed_add(listed_vocab *listed, const uint8_t *data, size_t len) {
    uint32_t i = listed->count++;
    memcpy(listed->token[i], data, len);
    listed->token_len[i] = (uint32_t)len;
    listed->token_rank[i] = 0;
    uint32_t slot = listed_hash(data, len);
    while (listed->slot[slot] != 0) {
        slot = (slot + 1) & (LISTED_SLOTS - 1);
    }
    listed->slot[slot] = i + 1;
}

static int listed_has(const listed_vocab *listed, const uint8_t *data, size_t len) {
    return len >= 2 && listed_lookup(listed, data, len) != NAIVE_NONE;
}

static int32_t listed_build(const listed_vocab *listed, tki_vocab **out) {
    uint32_t total = 256 + listed->count;
    uint8_t *bytes = checked_malloc(256 + (size_t)listed->count * LISTED_MAX_LEN);
    uint64_t *offsets = checked_malloc(((size_t)total + 1) * sizeof(uint64_t));
    uint32_t *ranks = checked_malloc((size_t)total * sizeof(uint32_t));
    uint64_t used = 0;
    offsets[0] = 0;
    for (uint32_t i = 0; i < total; i++) {
        if (i < 256) {
            bytes[used++] = (uint8_t)i;
            ranks[i] = listed->byte_rank[i];
        } else {
            memcpy(bytes + used, listed->token[i - 256], listed->token_len[i - 256]);
            used += listed->token_len[i - 256];
            ranks[i] = listed->token_rank[i - 256];
        }
        offsets[i + 1] = used;
    }
    uint32_t error_index = 0;
    int32_t status =
        tki_vocab_build(bytes, offsets, ranks, total, NULL, NULL, NULL, 0, out, &error_index);
    free(bytes);
    free(offsets);
    free(ranks);
    return status;
}

/* Noncanonical and improper counts as docs/algorithm.md section 2 defines them, with naive_bpe. */
static void listed_classify(const listed_vocab *listed, uint32_t *noncanonical,
                            uint32_t *improper) {
    size_t starts[LISTED_MAX_LEN + 1];
    uint32_t parts[LISTED_MAX_LEN];
    uint8_t canonical[LISTED_MAX_TOKENS];
    uint32_t pre[LISTED_MAX_TOKENS], suc[LISTED_MAX_TOKENS];
    uint8_t descended[LISTED_MAX_TOKENS];
    *noncanonical = 0;
    *improper = 0;
    for (uint32_t i = 0; i < listed->count; i++) {
        naive_record record;
        size_t n = naive_bpe(listed_lookup, listed, listed->token[i], listed->token_len[i],
                             starts, parts, &record);
        canonical[i] = n == 1;
        descended[i] = (uint8_t)record.ranks_descended;
        pre[i] = suc[i] = NAIVE_NONE;
        if (n == 1) {
            pre[i] = listed_lookup(listed, listed->token[i], record.last_left_length);
            suc[i] = listed_lookup(listed, listed->token[i] + record.last_left_length,
                                   listed->token_len[i] - record.last_left_length);
        } else {
            (*noncanonical)++;
        }
    }
    for (uint32_t i = 0; i < listed->count; i++) {
        if (!canonical[i]) {
            continue;
        }
        int bad = descended[i];
        for (int side = 0; side < 2; side++) {
            uint32_t rank = side == 0 ? pre[i] : suc[i];
            for (uint32_t j = 0; j < listed->count; j++) {
                if (listed->token_rank[j] == rank && !canonical[j]) {
                    bad = 1;
                }
            }
        }
        *improper += (uint32_t)bad;
    }
}

/*
 * Every string over `alphabet` of length 1..max_len: every method, with and
 * without the shortcut, against naive_bpe; every prefix of the longest ones.
 */
static void check_listed_exhaustive(const listed_vocab *listed, const tki_vocab *vocab,
                                    const char *alphabet, size_t max_len) {
    size_t letters = strlen(alphabet);
    size_t strings = 0, total_bytes = 0, power = 1;
    for (size_t n = 1; n <= max_len; n++) {
        power *= letters;
        strings += power;
        total_bytes += power * n;
    }
    uint8_t *data = checked_malloc(total_bytes);
    size_t *ends = checked_malloc(strings * sizeof(size_t));
    uint32_t *want = checked_malloc(total_bytes * sizeof(uint32_t));
    uint32_t *want_cut = checked_malloc(total_bytes * sizeof(uint32_t));
    size_t want_count = 0, want_cut_count = 0, used = 0, piece = 0;
    size_t starts[LISTED_MAX_LEN + 1];
    uint32_t naive[LISTED_MAX_LEN];
    for (size_t n = 1; n <= max_len; n++) {
        size_t combos = 1;
        for (size_t k = 0; k < n; k++) {
            combos *= letters;
        }
        for (size_t value = 0; value < combos; value++) {
            size_t v = value;
            for (size_t k = n; k-- > 0;) {
                data[used + k] = (uint8_t)alphabet[v % letters];
                v /= letters;
            }
            size_t count = naive_bpe(listed_lookup, listed, data + used, n, starts, naive, NULL);
            memcpy(want + want_count, naive, count * sizeof(uint32_t));
            want_count += count;
            if (listed_has(listed, data + used, n) || n == 1) {
                want_cut[want_cut_count++] = listed_lookup(listed, data + used, n);
            } else {
                memcpy(want_cut + want_cut_count, naive, count * sizeof(uint32_t));
                want_cut_count += count;
            }
            used += n;
            ends[piece++] = used;
        }
    }
    uint32_t *got = checked_malloc(total_bytes * sizeof(uint32_t));
    static const uint32_t methods[3] = {0, TKI_METHOD_LINEAR, TKI_METHOD_HEAP};
    static const char *const names[3] = {"default", "linear", "heap"};
    for (int m = 0; m < 3; m++) {
        for (int cut = 0; cut < 2; cut++) {
            size_t got_count = 0;
            uint32_t flags = methods[m] | (cut ? TKI_WHOLE_PIECE_SHORTCUT : 0);
            int32_t status = tki_encode_pieces(vocab, data, total_bytes, ends, strings, flags, got,
                                               total_bytes, &got_count);
            CHECK_STATUS(status, TKI_OK, names[m]);
            char what[64];
            snprintf(what, sizeof(what), "all strings, %s%s vs naive", names[m],
                     cut ? " + shortcut" : "");
            if (cut) {
                CHECK_SAME_IDS(got, got_count, want_cut, want_cut_count, what);
            } else {
                CHECK_SAME_IDS(got, got_count, want, want_count, what);
            }
            if (m == 0 && !cut) {
                check_decodes_to(vocab, got, got_count, data, total_bytes, "all strings");
            }
        }
    }
    tki_vocab_info info;
    tki_vocab_get_info(vocab, &info);
    if (info.incremental) {
        /* Every prefix of every longest string. */
        uint32_t prefix_default[LISTED_MAX_LEN], prefix_linear[LISTED_MAX_LEN];
        size_t first_longest = total_bytes - power * max_len;
        for (size_t at = first_longest; at < total_bytes; at += max_len) {
            const uint8_t *s = data + at;
            CHECK_STATUS(tki_prefix_last_tokens(vocab, s, max_len, 0, prefix_default), TKI_OK,
                         "prefix default");
            CHECK_STATUS(tki_prefix_last_tokens(vocab, s, max_len, TKI_METHOD_LINEAR,
                                                prefix_linear),
                         TKI_OK, "prefix linear");
            for (size_t i = 1; i <= max_len; i++) {
                size_t count = naive_bpe(listed_lookup, listed, s, i, starts, naive, NULL);
                CHECK(prefix_default[i - 1] == naive[count - 1] &&
                          prefix_linear[i - 1] == naive[count - 1],
                      "prefix %.*s: default %u, linear %u, naive %u", (int)i, (const char *)s,
                      prefix_default[i - 1], prefix_linear[i - 1], naive[count - 1]);
            }
        }
    } else {
        uint32_t out[1];
        CHECK_STATUS(tki_prefix_last_tokens(vocab, data, 1, 0, out), TKI_ERR_ARGUMENT,
                     "prefix_last_tokens on a vocabulary that is not incremental");
    }
    free(data);
    free(ends);
    free(want);
    free(want_cut);
    free(got);
}

/* Random long strings over the alphabet: methods agree, and agree with naive when short. */
static void check_listed_random(const listed_vocab *listed, const tki_vocab *vocab,
                                const uint8_t *sample, size_t sample_len, int inputs) {
    tki_vocab_info info;
    tki_vocab_get_info(vocab, &info);
    uint8_t *buffer = checked_malloc(4096);
    size_t *starts = checked_malloc(4097 * sizeof(size_t));
    uint32_t *naive = checked_malloc(4096 * sizeof(uint32_t));
    for (int t = 0; t < inputs; t++) {
        size_t len = 1 + random_below(t % 3 == 0 ? 4096 : 64);
        for (size_t i = 0; i < len; i++) {
            buffer[i] = sample[random_below((uint32_t)sample_len)];
        }
        uint32_t *ids[3];
        size_t count[3];
        static const uint32_t methods[3] = {0, TKI_METHOD_LINEAR, TKI_METHOD_HEAP};
        for (int m = 0; m < 3; m++) {
            CHECK_STATUS(encode_whole(vocab, buffer, len, methods[m], &ids[m], &count[m]), TKI_OK,
                         "encode_pieces");
        }
        CHECK_SAME_IDS(ids[0], count[0], ids[2], count[2], "random: default vs heap");
        CHECK_SAME_IDS(ids[1], count[1], ids[2], count[2], "random: linear vs heap");
        if (len <= 160) {
            size_t n = naive_bpe(listed_lookup, listed, buffer, len, starts, naive, NULL);
            CHECK_SAME_IDS(ids[2], count[2], naive, n, "random: heap vs naive");
        }
        if (info.incremental) {
            uint32_t *prefix_default = checked_malloc(len * sizeof(uint32_t));
            uint32_t *prefix_linear = checked_malloc(len * sizeof(uint32_t));
            CHECK_STATUS(tki_prefix_last_tokens(vocab, buffer, len, 0, prefix_default), TKI_OK,
                         "prefix default");
            CHECK_STATUS(tki_prefix_last_tokens(vocab, buffer, len, TKI_METHOD_LINEAR,
                                                prefix_linear),
                         TKI_OK, "prefix linear");
            CHECK_SAME_IDS(prefix_default, len, prefix_linear, len, "random: prefix default vs linear");
            CHECK(count[2] > 0 && prefix_default[len - 1] == ids[2][count[2] - 1],
                  "random: last prefix token differs from the last token");
            if (len <= 40) {
                for (size_t i = 1; i <= len; i++) {
                    size_t n = naive_bpe(listed_lookup, listed, buffer, i, starts, naive, NULL);
                    CHECK(prefix_default[i - 1] == naive[n - 1],
                          "random: prefix %zu: %u, naive %u", i, prefix_default[i - 1],
                          naive[n - 1]);
                }
            }
            free(prefix_default);
            free(prefix_linear);
        }
        for (int m = 0; m < 3; m++) {
            free(ids[m]);
        }
    }
    free(buffer);
    free(starts);
    free(naive);
}

static void check_listed_info(const listed_vocab *listed, const tki_vocab *vocab) {
    tki_vocab_info info;
    tki_vocab_get_info(vocab, &info);
    uint32_t noncanonical = 0, improper = 0, max_rank = 0, max_len = 1;
    listed_classify(listed, &noncanonical, &improper);
    for (uint32_t b = 0; b < 256; b++) {
        max_rank = listed->byte_rank[b] > max_rank ? listed->byte_rank[b] : max_rank;
    }
    for (uint32_t i = 0; i < listed->count; i++) {
        max_rank = listed->token_rank[i] > max_rank ? listed->token_rank[i] : max_rank;
        max_len = listed->token_len[i] > max_len ? listed->token_len[i] : max_len;
    }
    CHECK(info.token_count == 256 + listed->count, "token_count %u", info.token_count);
    CHECK(info.max_rank == max_rank, "max_rank %u, want %u", info.max_rank, max_rank);
    CHECK(info.max_token_bytes == max_len, "max_token_bytes %u, want %u", info.max_token_bytes,
          max_len);
    CHECK(info.noncanonical_count == noncanonical, "noncanonical_count %u, want %u",
          info.noncanonical_count, noncanonical);
    CHECK(info.improper_count == improper, "improper_count %u, want %u", info.improper_count,
          improper);
    CHECK(info.incremental == 1, "incremental %u with %u improper tokens (properized)",
          info.incremental, improper);
    CHECK(info.properization_rejects == 0 && info.watched_tokens <= info.moved_rules &&
              (improper == 0) == (info.moved_rules == 0),
          "properization: %u moved, %u watched, %u rejected, %u improper", info.moved_rules,
          info.watched_tokens, info.properization_rejects, improper);
}

/*
 * Ranks: the 256 bytes and the tokens in a random order, sometimes with holes,
 * sometimes (`sparse`) spread over every value below 2^32 - 1 (the core
 * renumbers them: the tables must not follow the largest rank).
 */
static void assign_random_ranks(listed_vocab *listed, int sparse) {
    uint32_t total = 256 + listed->count;
    uint32_t order[256 + LISTED_MAX_TOKENS];
    for (uint32_t i = 0; i < total; i++) {
        order[i] = i;
    }
    uint32_t mode = random_below(4);
    if (mode == 0) {
        shuffle_u32(order + 256, listed->count); /* bytes first, tokens shuffled */
    } else {
        shuffle_u32(order, total); /* everything shuffled */
    }
    uint32_t stride = sparse ? (UINT32_MAX - 1) / total : mode == 3 ? 3 : 1;
    for (uint32_t i = 0; i < total; i++) {
        uint32_t rank = order[i] * stride + (stride > 1 ? random_below(stride) : 0);
        if (i < 256) {
            listed->byte_rank[i] = rank;
        } else {
            listed->token_rank[i - 256] = rank;
        }
    }
}

static void run_small_vocab_tests(int quick) {
    listed_vocab *listed = checked_calloc(1, sizeof(listed_vocab));
    uint32_t incremental = 0, total = 0, improper = 0, watched = 0;
    for (int letters = 2; letters <= 3; letters++) {
        const char *alphabet = letters == 2 ? "ab" : "abc";
        int vocabularies = quick ? 60 : (letters == 2 ? 400 : 150);
        case_begin("small random vocabularies over %s", alphabet);
        for (int v = 0; v < vocabularies; v++) {
            memset(listed, 0, sizeof(*listed));
            uint32_t wanted = 1 + random_below(letters == 2 ? 5 : 7);
            for (uint32_t k = 0; k < wanted; k++) {
                uint8_t token[4];
                uint32_t len = 2 + random_below(3);
                for (uint32_t i = 0; i < len; i++) {
                    token[i] = (uint8_t)alphabet[random_below((uint32_t)letters)];
                }
                if (!listed_has(listed, token, len)) {
                    listed_add(listed, token, len);
                }
            }
            int sparse = v % 4 == 3;
            assign_random_ranks(listed, sparse);
            tki_vocab *vocab = NULL;
            int32_t status = listed_build(listed, &vocab);
            CHECK_STATUS(status, TKI_OK, "tki_vocab_build");
            if (status != TKI_OK) {
                continue;
            }
            check_listed_info(listed, vocab);
            if (sparse) {
                tki_vocab_info sparse_info;
                tki_vocab_get_info(vocab, &sparse_info);
                CHECK(sparse_info.sparse_ids == 1 && sparse_info.memory_bytes < (1u << 20),
                      "ranks up to %u: sparse_ids %u, %llu bytes of tables", sparse_info.max_rank,
                      sparse_info.sparse_ids, (unsigned long long)sparse_info.memory_bytes);
            }
            check_listed_exhaustive(listed, vocab, alphabet, letters == 2 ? 10 : 8);
            tki_vocab_info info;
            tki_vocab_get_info(vocab, &info);
            incremental += info.incremental;
            improper += info.improper_count > 0;
            watched += info.watched_tokens > 0;
            total++;
            tki_vocab_free(vocab);
        }
        case_end();
    }
    fprintf(stdout,
            "small random vocabularies: %u of %u incremental, %u improper (properized; %u with "
            "watched tokens)\n",
            incremental, total, improper, watched);

    /* One letter: a..aaaaa, every subset of the longer tokens in every rank order. */
    case_begin("one letter: every subset of aa..aaaaa in every order");
    {
        uint32_t vocabularies = 0;
        for (uint32_t subset = 1; subset < 16; subset++) {
            uint32_t members[4], count = 0;
            for (uint32_t k = 0; k < 4; k++) {
                if (subset & (1u << k)) {
                    members[count++] = k + 2; /* token length */
                }
            }
            /* Every permutation of the members (Heap's algorithm, iteratively). */
            uint32_t c[4] = {0, 0, 0, 0};
            uint32_t perm[4];
            memcpy(perm, members, sizeof(perm));
            for (uint32_t i = 0;;) {
                memset(listed, 0, sizeof(*listed));
                for (uint32_t b = 0; b < 256; b++) {
                    listed->byte_rank[b] = b;
                }
                for (uint32_t k = 0; k < count; k++) {
                    uint8_t run[8];
                    memset(run, 'a', perm[k]);
                    listed_add(listed, run, perm[k]);
                    listed->token_rank[k] = 256 + k;
                }
                tki_vocab *vocab = NULL;
                int32_t status = listed_build(listed, &vocab);
                CHECK_STATUS(status, TKI_OK, "tki_vocab_build");
                if (status == TKI_OK) {
                    check_listed_info(listed, vocab);
                    check_listed_exhaustive(listed, vocab, "a", 24);
                    tki_vocab_free(vocab);
                }
                vocabularies++;
                while (i < count && c[i] >= i) {
                    c[i] = 0;
                    i++;
                }
                if (i >= count) {
                    break;
                }
                uint32_t j = (i % 2 == 0) ? 0 : c[i];
                uint32_t swap = perm[j];
                perm[j] = perm[i];
                perm[i] = swap;
                c[i]++;
                i = 0;
            }
        }
        CHECK(vocabularies == 64, "%u vocabularies, want 64", vocabularies);
    }
    case_end();
    free(listed);
}

/*
 * Small trained vocabularies: BPE training on a random corpus (the way the
 * real files were made, so they are usually proper and have long suffix
 * chains that exercise the centroid search), with tokens up to 64 bytes.
 */
static void train_vocab(listed_vocab *listed, const uint8_t *corpus, size_t len, uint32_t merges) {
    memset(listed, 0, sizeof(*listed));
    for (uint32_t b = 0; b < 256; b++) {
        listed->byte_rank[b] = b;
    }
    uint32_t *ids = checked_malloc(len * sizeof(uint32_t));
    for (size_t i = 0; i < len; i++) {
        ids[i] = corpus[i];
    }
    size_t n = len;
    uint32_t symbols = 256 + LISTED_MAX_TOKENS;
    uint32_t *pair_count = checked_calloc((size_t)symbols * symbols, sizeof(uint32_t));
    for (uint32_t round = 0; round < merges && listed->count < LISTED_MAX_TOKENS; round++) {
        uint32_t best = 0, best_a = 0, best_b = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            uint32_t c = ++pair_count[(size_t)ids[i] * symbols + ids[i + 1]];
            if (c > best) {
                best = c;
                best_a = ids[i];
                best_b = ids[i + 1];
            }
        }
        for (size_t i = 0; i + 1 < n; i++) { /* back to all zero, touching only what was counted */
            pair_count[(size_t)ids[i] * symbols + ids[i + 1]] = 0;
        }
        if (best < 2) {
            break;
        }
        uint8_t token[2 * LISTED_MAX_LEN];
        size_t token_len = 0;
        for (int side = 0; side < 2; side++) {
            uint32_t id = side == 0 ? best_a : best_b;
            if (id < 256) {
                token[token_len++] = (uint8_t)id;
            } else {
                memcpy(token + token_len, listed->token[id - 256], listed->token_len[id - 256]);
                token_len += listed->token_len[id - 256];
            }
        }
        if (token_len > LISTED_MAX_LEN) {
            break;
        }
        uint32_t merged = listed_lookup(listed, token, token_len); /* ranks are 256 + index */
        if (merged == NAIVE_NONE) {
            merged = 256 + listed->count;
            listed_add(listed, token, token_len);
            listed->token_rank[merged - 256] = merged;
        }
        size_t out = 0;
        for (size_t i = 0; i < n; i++) {
            if (i + 1 < n && ids[i] == best_a && ids[i + 1] == best_b) {
                ids[out++] = merged;
                i++;
            } else {
                ids[out++] = ids[i];
            }
        }
        n = out;
    }
    free(pair_count);
    free(ids);
}

static void run_trained_vocab_tests(int quick) {
    listed_vocab *listed = checked_calloc(1, sizeof(listed_vocab));
    uint8_t *corpus = checked_malloc(6000);
    uint32_t incremental = 0, total = 0, longest_chain = 0;
    int vocabularies = quick ? 8 : 40;
    case_begin("small trained vocabularies");
    for (int v = 0; v < vocabularies; v++) {
        /* A corpus of words from a small random lexicon over a, b, c. */
        uint8_t lexicon[12][40];
        size_t lexicon_len[12];
        const char *alphabet = v % 2 == 0 ? "ab" : "abc";
        uint32_t letters = (uint32_t)strlen(alphabet);
        for (int w = 0; w < 12; w++) {
            lexicon_len[w] = 1 + random_below(w < 4 ? 3 : 40);
            /* Some words are runs of one letter: long suffix chains (a, aa, aaa, ...). */
            int run = v % 2 == 1 && w % 3 == 0;
            uint8_t letter = (uint8_t)alphabet[random_below(letters)];
            for (size_t i = 0; i < lexicon_len[w]; i++) {
                lexicon[w][i] = run ? letter : (uint8_t)alphabet[random_below(letters)];
            }
        }
        size_t len = 0;
        while (len < 5000 && v % 4 == 1) {
            /* Runs of every length: a, aa, aaa, ... all become tokens (long suffix chains). */
            size_t run = 1 + random_below(60);
            memset(corpus + len, alphabet[0], run);
            len += run;
            corpus[len++] = (uint8_t)alphabet[1 + random_below(letters - 1)];
        }
        while (len < 5000) {
            uint32_t w = random_below(12);
            memcpy(corpus + len, lexicon[w], lexicon_len[w]);
            len += lexicon_len[w];
            if (v % 3 == 0) {
                corpus[len++] = ' ';
            }
        }
        train_vocab(listed, corpus, len, 100 + random_below(500));
        if (v % 4 == 3) {
            /* The bytes' own ranks do not matter (docs/algorithm.md section 2): shuffle them. */
            uint32_t ranks[256];
            for (uint32_t b = 0; b < 256; b++) {
                ranks[b] = b;
            }
            shuffle_u32(ranks, 256);
            memcpy(listed->byte_rank, ranks, sizeof(ranks));
        }
        tki_vocab *vocab = NULL;
        int32_t status = listed_build(listed, &vocab);
        CHECK_STATUS(status, TKI_OK, "tki_vocab_build");
        if (status != TKI_OK) {
            continue;
        }
        check_listed_info(listed, vocab);
        tki_vocab_info info;
        tki_vocab_get_info(vocab, &info);
        incremental += info.incremental;
        longest_chain =
            info.longest_suffix_chain > longest_chain ? info.longest_suffix_chain : longest_chain;
        total++;
        check_listed_exhaustive(listed, vocab, alphabet, letters == 2 ? 10 : 7);
        check_listed_random(listed, vocab, corpus, len, quick ? 10 : 30);
        static const uint8_t letters_only[] = {'a', 'b', 'c'};
        check_listed_random(listed, vocab, letters_only, letters, quick ? 4 : 10);
        tki_vocab_free(vocab);
    }
    case_end();
    fprintf(stdout, "small trained vocabularies: %u of %u incremental, longest suffix chain %u\n",
            incremental, total, longest_chain);
    free(corpus);
    free(listed);
}

/* The 256 one-byte tokens (rank = byte) first in a token list; returns their count, *used their bytes. */
static uint32_t add_single_bytes(uint8_t *bytes, uint64_t *offsets, uint32_t *ranks, uint64_t *used) {
    offsets[0] = 0;
    for (uint32_t b = 0; b < 256; b++) {
        bytes[b] = (uint8_t)b;
        ranks[b] = b;
        offsets[b + 1] = b + 1;
    }
    *used = 256;
    return 256;
}

/* Tokens up to TKI_MAX_TOKEN_BYTES: a, aa, a^4, ..., a^4096, and a noncanonical 4096-byte token. */
static void run_long_token_tests(void) {
    case_begin("tokens of up to TKI_MAX_TOKEN_BYTES bytes");
    uint32_t lengths = 13; /* 1, 2, 4, ..., 4096 */
    size_t pool = 256 + 2 * 4096 + 4096 + 2 * 8192;
    uint8_t *bytes = checked_malloc(pool);
    uint64_t *offsets = checked_malloc((256 + 16) * sizeof(uint64_t));
    uint32_t *ranks = checked_malloc((256 + 16) * sizeof(uint32_t));
    uint64_t used = 0;
    uint32_t count = add_single_bytes(bytes, offsets, ranks, &used);
    for (uint32_t j = 1; j < lengths; j++) {
        memset(bytes + used, 'a', (size_t)1 << j);
        used += (uint64_t)1 << j;
        ranks[count] = 255 + j;
        offsets[++count] = used;
    }
    for (uint32_t i = 0; i < 4096; i++) { /* "ab" repeated: not reachable by merges */
        bytes[used + i] = (uint8_t)(i % 2 == 0 ? 'a' : 'b');
    }
    used += 4096;
    ranks[count] = 1000;
    offsets[++count] = used;
    tki_vocab *vocab = NULL;
    uint32_t error_index = 0;
    int32_t status =
        tki_vocab_build(bytes, offsets, ranks, count, NULL, NULL, NULL, 0, &vocab, &error_index);
    CHECK_STATUS(status, TKI_OK, "build with a 4096-byte token");
    if (status == TKI_OK) {
        tki_vocab_info info;
        tki_vocab_get_info(vocab, &info);
        CHECK(info.max_token_bytes == 4096, "max_token_bytes %u", info.max_token_bytes);
        CHECK(info.noncanonical_count == 1, "noncanonical_count %u", info.noncanonical_count);
        uint8_t *run = checked_malloc(20000);
        memset(run, 'a', 20000);
        static const size_t run_lengths[] = {1, 3, 4095, 4096, 4097, 8191, 8192, 12288, 20000};
        for (size_t k = 0; k < sizeof(run_lengths) / sizeof(run_lengths[0]); k++) {
            check_input(vocab, run, run_lengths[k], info.incremental);
        }
        /* The 4096-byte "abab..." token only through the shortcut. */
        size_t end = 4096, n = 0;
        uint32_t *out = checked_malloc(4096 * sizeof(uint32_t));
        status = tki_encode_pieces(vocab, bytes + offsets[count - 1], 4096, &end, 1,
                                   TKI_WHOLE_PIECE_SHORTCUT, out, 4096, &n);
        CHECK(status == TKI_OK && n == 1 && out[0] == 1000, "shortcut to the 4096-byte token");
        status = tki_encode_pieces(vocab, bytes + offsets[count - 1], 4096, &end, 1, 0, out,
                                   4096, &n);
        CHECK(status == TKI_OK && n == 4096, "no shortcut: 4096 single bytes, got %zu", n);
        free(out);
        free(run);
        tki_vocab_free(vocab);
    }
    /* One byte more is built too (tiktoken builds it), and encoded with the heap BPE. */
    memset(bytes + used, 'b', 4097);
    used += 4097;
    ranks[count] = 2000;
    offsets[++count] = used;
    vocab = NULL;
    status =
        tki_vocab_build(bytes, offsets, ranks, count, NULL, NULL, NULL, 0, &vocab, &error_index);
    CHECK_STATUS(status, TKI_OK, "build with a 4097-byte token");
    if (status == TKI_OK) {
        tki_vocab_info long_info;
        tki_vocab_get_info(vocab, &long_info);
        CHECK(!long_info.incremental && long_info.max_token_bytes == 4097,
              "a 4097-byte token: incremental %u, longest %u", long_info.incremental,
              long_info.max_token_bytes);
        size_t piece_end = 4098, produced = 0;
        uint32_t *long_out = checked_malloc(4098 * sizeof(uint32_t));
        uint8_t *long_text = checked_malloc(4098);
        memset(long_text, 'b', 4098);
        /* The token as a whole piece; one byte more: single bytes (nothing merges to it). */
        piece_end = 4097;
        status = tki_encode_pieces(vocab, long_text, 4097, &piece_end, 1,
                                   TKI_WHOLE_PIECE_SHORTCUT, long_out, 4098, &produced);
        CHECK_STATUS(status, TKI_OK, "a 4097-byte piece");
        CHECK(produced == 1 && long_out[0] == 2000, "4097 b's: %zu ids", produced);
        piece_end = 4098;
        status = tki_encode_pieces(vocab, long_text, 4098, &piece_end, 1,
                                   TKI_WHOLE_PIECE_SHORTCUT, long_out, 4098, &produced);
        CHECK_STATUS(status, TKI_OK, "heap BPE beside a 4097-byte token");
        CHECK(produced == 4098 && long_out[0] == 'b', "4098 b's: %zu ids", produced);
        free(long_out);
        free(long_text);
    }
    tki_vocab_free(vocab);
    /* A long special token is fine (only mergeable tokens are limited). */
    uint64_t special_offsets[2] = {0, 8192};
    uint8_t *special = checked_malloc(8192);
    memset(special, 'z', 8192);
    uint32_t special_rank = 5000;
    status = tki_vocab_build(bytes, offsets, ranks, count - 1, special, special_offsets,
                             &special_rank, 1, &vocab, &error_index);
    CHECK_STATUS(status, TKI_OK, "build with an 8192-byte special token");
    if (status == TKI_OK) {
        uint8_t *decoded = checked_malloc(8192);
        size_t len = 0, bad = 0;
        CHECK_STATUS(tki_decode(vocab, &special_rank, 1, decoded, 8192, &len, &bad), TKI_OK,
                     "decode the long special");
        CHECK(len == 8192 && memcmp(decoded, special, 8192) == 0, "long special decodes wrong");
        CHECK_STATUS(tki_decode(vocab, &special_rank, 1, decoded, 8191, &len, &bad),
                     TKI_ERR_ARGUMENT, "decode into one byte too few");
        free(decoded);
        tki_vocab_free(vocab);
    }
    free(special);
    free(bytes);
    free(offsets);
    free(ranks);
    case_end();
}

/*
 * A hash slot holds a key's length and first 11 bytes; a longer key that
 * shares them with a token and lands in the token's slot must still be told
 * apart by the rest of its bytes.  Such keys are made on purpose: a token's
 * bytes with one byte at or past the eleventh changed, and another one tried
 * over all values until the key's slot is the token's.
 */
static void run_hash_collision_tests(void) {
    case_begin("hash: keys that collide with a token and differ past its slot's bytes");
    static const size_t lengths[] = {13, 19, 20, 27, 30, 40, 300};
    enum { LENGTHS = sizeof(lengths) / sizeof(lengths[0]) };
    size_t pool = 256;
    for (size_t k = 0; k < LENGTHS; k++) {
        pool += lengths[k];
    }
    uint8_t *bytes = checked_malloc(pool);
    uint64_t *offsets = checked_malloc((256 + LENGTHS + 1) * sizeof(uint64_t));
    uint32_t *ranks = checked_malloc((256 + LENGTHS) * sizeof(uint32_t));
    uint64_t used = 0;
    uint32_t count = add_single_bytes(bytes, offsets, ranks, &used);
    for (size_t k = 0; k < LENGTHS; k++) {
        for (size_t i = 0; i < lengths[k]; i++) {
            bytes[used + i] = (uint8_t)('a' + (i * 7 + k) % 26);
        }
        used += lengths[k];
        ranks[count] = 300 + (uint32_t)k;
        offsets[++count] = used;
    }
    tki_vocab *vocab = NULL;
    uint32_t error_index = 0;
    int32_t status =
        tki_vocab_build(bytes, offsets, ranks, count, NULL, NULL, NULL, 0, &vocab, &error_index);
    CHECK_STATUS(status, TKI_OK, "build");
    size_t made = 0;
    uint8_t key[300];
    for (size_t k = 0; status == TKI_OK && k < LENGTHS; k++) {
        size_t len = lengths[k];
        const uint8_t *token = bytes + offsets[256 + k];
        uint64_t token_slot = tki_hash_slot_of(vocab, tki_hash_head(token, len, 0), token, len);
        size_t changed[3] = {11, len / 2 + 3, len - 1};
        for (size_t c = 0; c < 3; c++) {
            size_t at = changed[c], free_at = at == len - 1 ? 12 : len - 1;
            int found = 0;
            for (uint32_t value = 0; value < 65536 && !found; value++) {
                memcpy(key, token, len);
                key[at] = (uint8_t)(token[at] ^ (1 + value % 255));
                key[free_at] = (uint8_t)(value / 255);
                if (tki_hash_slot_of(vocab, tki_hash_head(key, len, 0), key, len) != token_slot ||
                    memcmp(key, token, len) == 0) {
                    continue;
                }
                found = 1;
                made++;
                uint32_t rank = 0;
                CHECK(tki_token_rank(vocab, key, len, &rank) == TKI_ERR_UNKNOWN_TOKEN,
                      "a %zu-byte key in a token's slot, changed at %zu, found as rank %u", len, at,
                      (unsigned)rank);
                CHECK(tki_token_rank(vocab, token, len, &rank) == TKI_OK && rank == 300 + k,
                      "the %zu-byte token itself", len);
            }
        }
    }
    CHECK(made >= 3 * LENGTHS - 2, "only %zu colliding keys made", made);
    tki_vocab_free(vocab);
    free(bytes);
    free(offsets);
    free(ranks);
    case_end();
}

/*
 * The memo of short pieces (csrc/piece_memo.h) keys a piece by its memo slot,
 * its first 11 bytes and length (as the token hash does), and its bytes after
 * those.  Pairs of pieces of 13, 17 and 27 bytes, each of at most
 * TKI_MEMO_RANKS ids, that share the slot, the first 12 bytes and the length,
 * and differ at byte 12 or at their last (5 pairs), alternate in one text and
 * from one call to the next; each must keep its own ids, those of the heap BPE
 * (which no memo serves).  The letters are Cyrillic а, б, в, г (two bytes
 * each), and every pair and quadruple of them is a token, so that a piece of
 * 27 bytes can have few enough ids for the memo to keep it.
 */
static void run_piece_memo_tests(void) {
    case_begin("memo: pieces in one slot, alike in their first 12 bytes, in turn");
    uint8_t *bytes = checked_malloc(256 + 4 * 2 + 16 * 4 + 256 * 8);
    uint64_t *offsets = checked_malloc((256 + 4 + 16 + 256 + 1) * sizeof(uint64_t));
    uint32_t *ranks = checked_malloc((256 + 4 + 16 + 256) * sizeof(uint32_t));
    uint64_t used = 0;
    uint32_t count = add_single_bytes(bytes, offsets, ranks, &used);
    for (uint32_t letters = 1; letters <= 4; letters *= 2) {
        for (uint32_t n = 0; n < (1u << (2 * letters)); n++) {
            for (uint32_t i = 0; i < letters; i++) {
                bytes[used++] = 0xd0;
                bytes[used++] = (uint8_t)(0xb0 + (n >> (2 * (letters - 1 - i)) & 3));
            }
            ranks[count] = count;
            offsets[++count] = used;
        }
    }
    tki_vocab *vocab = NULL;
    uint32_t error_index = 0;
    CHECK_STATUS(tki_vocab_build(bytes, offsets, ranks, count, NULL, NULL, NULL, 0, &vocab, &error_index),
                 TKI_OK, "build");
    static const size_t lengths[] = {13, 17, 27};
    size_t pairs = 0;
    for (size_t l = 0; vocab != NULL && l < 3; l++) {
        size_t len = lengths[l];
        for (size_t differ_at = 12; differ_at < len; differ_at = differ_at == len - 1 ? len : len - 1) {
            uint8_t first[27], second[27];
            int found = 0;
            /* Pairs drawn until one lands in a single slot, both with ids the memo keeps:
             * `first` a space and letters, `second` the same with the letter that ends at
             * differ_at changed and the letters after byte 12 drawn. */
            for (uint32_t attempt = 0; attempt < 1000000 && !found; attempt++) {
                first[0] = ' '; /* a piece of cl100k's pattern: a space, then letters */
                for (size_t i = 1; i < len; i += 2) {
                    first[i] = 0xd0;
                    first[i + 1] = (uint8_t)(0xb0 + next_random() % 4);
                }
                memcpy(second, first, len);
                second[differ_at] = (uint8_t)(0xb0 + (first[differ_at] - 0xb0 + 1 + next_random() % 3) % 4);
                for (size_t i = 14; i < len; i += 2) {
                    if (i != differ_at) {
                        second[i] = (uint8_t)(0xb0 + next_random() % 4);
                    }
                }
                uint64_t slot = tki_hash_slot_of(vocab, tki_hash_head(first, len, 0), first, len);
                if ((tki_hash_slot_of(vocab, tki_hash_head(second, len, 0), second, len) &
                     (TKI_MEMO_SLOTS - 1)) != (slot & (TKI_MEMO_SLOTS - 1))) {
                    continue;
                }
                uint32_t ids[27];
                size_t first_ids = 0, second_ids = 0;
                found = tki_encode_text(vocab, TKI_PATTERN_CL100K, first, len, TKI_METHOD_HEAP, ids, len, &first_ids,
                                        NULL) == TKI_OK &&
                        tki_encode_text(vocab, TKI_PATTERN_CL100K, second, len, TKI_METHOD_HEAP, ids, len,
                                        &second_ids, NULL) == TKI_OK &&
                        first_ids <= TKI_MEMO_RANKS && second_ids <= TKI_MEMO_RANKS;
            }
            CHECK(found, "no %zu-byte piece in the memo slot of another", len);
            if (!found) {
                continue;
            }
            pairs++;
            uint8_t text[20 * 27];
            size_t text_len = 0;
            for (size_t r = 0; r < 20; r++) { /* first, second, second, first, ... */
                memcpy(text + text_len, (r % 4 == 0 || r % 4 == 3) ? first : second, len);
                text_len += len;
            }
            for (size_t call = 0; call < 3; call++) {
                const uint8_t *input = call == 2 ? second : text;
                size_t input_len = call == 2 ? len : text_len;
                uint32_t got[20 * 27], want[20 * 27];
                size_t got_count = 0, want_count = 0;
                CHECK_STATUS(tki_encode_text(vocab, TKI_PATTERN_CL100K, input, input_len, 0, got, input_len,
                                             &got_count, NULL),
                             TKI_OK, "encode");
                CHECK_STATUS(tki_encode_text(vocab, TKI_PATTERN_CL100K, input, input_len, TKI_METHOD_HEAP, want,
                                             input_len, &want_count, NULL),
                             TKI_OK, "encode with the heap BPE");
                CHECK(got_count == want_count && memcmp(got, want, got_count * sizeof(uint32_t)) == 0,
                      "%zu-byte pieces differing at byte %zu, call %zu: the ids differ from the heap BPE's", len,
                      differ_at, call);
            }
            /* The prefix pass keeps pieces that are no token by the same hash slot (its memo has
             * fewer slots): over 4 KiB of the two in turn, each piece's steps are its own. */
            enum { PASS_BYTES = 4096 + 8 * 27 };
            static uint8_t pass_text[PASS_BYTES];
            static uint32_t pass_steps[PASS_BYTES];
            uint32_t first_steps[27], second_steps[27];
            size_t pass_len = 0;
            for (size_t r = 0; pass_len + len <= PASS_BYTES; r++) {
                memcpy(pass_text + pass_len, (r % 4 == 0 || r % 4 == 3) ? first : second, len);
                pass_len += len;
            }
            CHECK_STATUS(tki_prefix_last_tokens(vocab, first, len, 0, first_steps), TKI_OK, "steps of the first");
            CHECK_STATUS(tki_prefix_last_tokens(vocab, second, len, 0, second_steps), TKI_OK, "steps of the second");
            CHECK_STATUS(tki_prefix_pass(vocab, TKI_PATTERN_CL100K, pass_text, pass_len, 0, pass_steps), TKI_OK,
                         "prefix pass");
            for (size_t r = 0; r * len < pass_len; r++) {
                const uint32_t *want = (r % 4 == 0 || r % 4 == 3) ? first_steps : second_steps;
                CHECK(memcmp(pass_steps + r * len, want, len * sizeof(uint32_t)) == 0,
                      "%zu-byte pieces differing at byte %zu: the prefix pass's steps of piece %zu are another's",
                      len, differ_at, r);
            }
        }
    }
    CHECK(pairs == 5, "only %zu pairs of pieces made", pairs);
    tki_vocab_forget_pieces(vocab);
    tki_vocab_forget_pieces(NULL);
    tki_vocab_free(vocab);
    free(bytes);
    free(offsets);
    free(ranks);
    case_end();
}

/*
 * A long suffix chain: tokens b^k a (k = 1..700, rank growing with k) are all
 * canonical and proper, and the canonical suffixes of b^700 a form a path of
 * 701 nodes (chains in the OpenAI files stay under 90), so the centroid
 * search runs about ten levels deep.  Plus bb and bbbb to branch the tree.
 */
static void run_long_chain_tests(int quick) {
    enum { LONGEST = 700 };
    case_begin("a suffix chain of %d tokens", LONGEST + 1);
    uint32_t count = 256 + LONGEST + 2;
    size_t pool = 256 + (size_t)LONGEST * (LONGEST + 3) / 2 + 8;
    uint8_t *bytes = checked_malloc(pool);
    uint64_t *offsets = checked_malloc(((size_t)count + 1) * sizeof(uint64_t));
    uint32_t *ranks = checked_malloc((size_t)count * sizeof(uint32_t));
    uint64_t used = 0;
    uint32_t i = 0;
    offsets[0] = 0;
    for (; i < 256; i++) {
        bytes[used++] = (uint8_t)i;
        ranks[i] = i;
        offsets[i + 1] = used;
    }
    for (uint32_t k = 1; k <= LONGEST; k++, i++) {
        memset(bytes + used, 'b', k);
        bytes[used + k] = 'a';
        used += k + 1;
        ranks[i] = 300 + 3 * k;
        offsets[i + 1] = used;
    }
    memcpy(bytes + used, "bb", 2); /* merged after ba, bba: */
    used += 2;
    ranks[i] = 308;
    offsets[++i] = used;
    memcpy(bytes + used, "bbbb", 4);
    used += 4;
    ranks[i] = 5000;
    offsets[++i] = used;
    tki_vocab *vocab = NULL;
    uint32_t error_index = 0;
    int32_t status =
        tki_vocab_build(bytes, offsets, ranks, count, NULL, NULL, NULL, 0, &vocab, &error_index);
    CHECK_STATUS(status, TKI_OK, "build");
    if (status == TKI_OK) {
        tki_vocab_info info;
        tki_vocab_get_info(vocab, &info);
        CHECK(info.longest_suffix_chain >= 100, "longest_suffix_chain %u",
              info.longest_suffix_chain);
        fprintf(stdout, "suffix chain vocabulary: incremental %u, %u improper, %u noncanonical, "
                        "longest chain %u\n",
                info.incremental, info.improper_count, info.noncanonical_count,
                info.longest_suffix_chain);
        uint8_t *text = checked_malloc(8192);
        int inputs = quick ? 10 : 40;
        for (int t = 0; t < inputs; t++) {
            size_t len = 0, want = 1 + random_below(t % 2 == 0 ? 8000 : 900);
            while (len < want) {
                size_t run = random_below(t % 3 == 0 ? 800 : 40);
                for (size_t k = 0; k < run && len < want; k++) {
                    text[len++] = 'b';
                }
                if (len < want) {
                    text[len++] = random_below(8) == 0 ? 'c' : 'a';
                }
            }
            check_input(vocab, text, len, info.incremental);
        }
        tki_vocab_free(vocab);
        free(text);
    }
    free(bytes);
    free(offsets);
    free(ranks);
    case_end();
}

/* ------------------------------------------------------------------ UTF-8 check */

/* Appends the bytes of code point `cp` as UTF-8 would (surrogates and all:
 * the check must refuse those) and returns their number. */
static size_t put_code_point(uint8_t *out, uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | cp >> 6), out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | cp >> 12), out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | cp >> 18), out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)), out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/*
 * tki_utf8_valid_prefix against the plain decoder: texts of characters of one
 * or mixed lengths (the word-at-a-time paths take runs of one length), the
 * edges of each length's range and the surrogates among them, then a byte
 * changed, a byte dropped or the text cut, at every place.
 */
static void run_utf8_prefix_tests(int quick) {
    static const uint32_t edges[] = {0x00, 0x7F, 0x80, 0x7FF, 0x800, 0xFFF, 0x1000, 0xD7FF, 0xD800, 0xDFFF,
                                     0xE000, 0xFFFF, 0x10000, 0x3FFFF, 0x40000, 0xFFFFF, 0x100000, 0x10FFFF};
    static const uint32_t range_low[] = {0x20, 0x80, 0x800, 0x10000}, range_high[] = {0x7F, 0x800, 0x10000, 0x110000};
    uint8_t text[160];
    case_begin("tki_utf8_valid_prefix against a plain decoder");
    for (int trial = 0; trial < (quick ? 20000 : 200000); trial++) {
        size_t len = 0;
        const uint32_t characters = random_below(40), one_length = random_below(2), length_class = random_below(4);
        for (uint32_t c = 0; c < characters && len + 4 <= sizeof text; c++) {
            const uint32_t kind = one_length ? length_class : random_below(4);
            uint32_t cp = random_below(8) == 0 ? edges[random_below(sizeof edges / sizeof edges[0])]
                                               : range_low[kind] + random_below(range_high[kind] - range_low[kind]);
            if (cp >= 0xD800 && cp <= 0xDFFF && random_below(4) != 0) cp = 0x4E2D; /* surrogates now and then */
            len += put_code_point(text + len, cp);
        }
        const uint32_t change = random_below(4);
        if (change == 1 && len > 0) {
            text[random_below((uint32_t)len)] = (uint8_t)random_below(256);
        } else if (change == 2 && len > 1) {
            const size_t at = random_below((uint32_t)len);
            memmove(text + at, text + at + 1, len - at - 1);
            len--;
        } else if (change == 3 && len > 0) {
            len = random_below((uint32_t)len);
        }
        size_t error_offset = 0;
        const size_t want = plain_utf8_error(text, len, &error_offset) == 0 ? len : error_offset;
        const size_t got = tki_utf8_valid_prefix(text, len);
        CHECK(got == want, "trial %d: %zu bytes, valid prefix %zu, want %zu", trial, len, got, want);
        if (got != want) break;
    }
    case_end();
}

/* ------------------------------------------------------------------ error paths */

/* The 256 bytes (rank = byte + 10, leaving holes 0..9) plus extra tokens from a list. */
typedef struct token_list {
    uint8_t bytes[1024];
    uint64_t offsets[300];
    uint32_t ranks[300];
    uint32_t count;
    uint64_t used;
} token_list;

static void list_init(token_list *list, int skip_byte) {
    memset(list, 0, sizeof(*list));
    for (int b = 0; b < 256; b++) {
        if (b == skip_byte) {
            continue;
        }
        list->bytes[list->used++] = (uint8_t)b;
        list->ranks[list->count] = (uint32_t)b + 10;
        list->offsets[++list->count] = list->used;
    }
}

static void list_add(token_list *list, const char *text, size_t len, uint32_t rank) {
    memcpy(list->bytes + list->used, text, len);
    list->used += len;
    list->ranks[list->count] = rank;
    list->offsets[++list->count] = list->used;
}

static int32_t list_build(const token_list *list, tki_vocab **vocab, uint32_t *error_index) {
    *vocab = NULL;
    return tki_vocab_build(list->bytes, list->offsets, list->ranks, list->count, NULL, NULL, NULL,
                           0, vocab, error_index);
}

#define EXPECT_BUILD_FAILS(list, want_status, want_index, what)                                   \
    do {                                                                                          \
        tki_vocab *vocab_ = (tki_vocab *)&g_rng; /* must be reset to NULL */                      \
        uint32_t index_ = 12345;                                                                  \
        int32_t status_ = tki_vocab_build((list)->bytes, (list)->offsets, (list)->ranks,          \
                                          (list)->count, NULL, NULL, NULL, 0, &vocab_, &index_);  \
        CHECK_STATUS(status_, (want_status), (what));                                             \
        CHECK(vocab_ == NULL, "%s: *out_vocab not NULL after a failure", (what));                 \
        if ((int64_t)(want_index) >= 0) {                                                         \
            CHECK(index_ == (uint32_t)(want_index), "%s: error_index %u, want %u", (what),        \
                  index_, (uint32_t)(want_index));                                                \
        }                                                                                         \
        if (status_ == TKI_OK) {                                                                  \
            tki_vocab_free(vocab_);                                                               \
        }                                                                                         \
    } while (0)

static void run_error_tests(void) {
    token_list *list = checked_calloc(1, sizeof(token_list));

    case_begin("errors: status messages");
    for (int32_t s = TKI_OK; s <= TKI_STATUS_LAST; s++) {
        const char *message = tki_status_message(s);
        CHECK(message != NULL && message[0] != '\0', "status %d has no message", (int)s);
        for (int32_t t = TKI_OK; t < s; t++) {
            CHECK(message != NULL && strcmp(message, tki_status_message(t)) != 0,
                  "statuses %d and %d share a message", (int)s, (int)t);
        }
    }
    CHECK(tki_status_message(-1) != NULL && tki_status_message(99) != NULL,
          "unknown statuses need a message too");
    case_end();

    case_begin("errors: vocabulary build");
    list_init(list, -1);
    list_add(list, "ab", 2, 300);
    {
        tki_vocab *vocab = NULL;
        uint32_t index = 0;
        CHECK_STATUS(tki_vocab_build(list->bytes, list->offsets, list->ranks, list->count, NULL,
                                     NULL, NULL, 0, NULL, &index),
                     TKI_ERR_ARGUMENT, "NULL out_vocab");
        CHECK_STATUS(tki_vocab_build(list->bytes, NULL, list->ranks, list->count, NULL, NULL,
                                     NULL, 0, &vocab, &index),
                     TKI_ERR_ARGUMENT, "NULL token_offsets");
        CHECK(vocab == NULL, "vocab set after NULL offsets");
        CHECK_STATUS(tki_vocab_build(list->bytes, list->offsets, NULL, list->count, NULL, NULL,
                                     NULL, 0, &vocab, &index),
                     TKI_ERR_ARGUMENT, "NULL token_ranks");
        CHECK_STATUS(tki_vocab_build(NULL, list->offsets, list->ranks, list->count, NULL, NULL,
                                     NULL, 0, &vocab, &index),
                     TKI_ERR_ARGUMENT, "NULL token_bytes");
        uint32_t special_rank = 400;
        CHECK_STATUS(tki_vocab_build(list->bytes, list->offsets, list->ranks, list->count, NULL,
                                     list->offsets, &special_rank, 1, &vocab, &index),
                     TKI_ERR_ARGUMENT, "NULL special_bytes");
        CHECK_STATUS(tki_vocab_build(list->bytes, list->offsets, list->ranks, list->count,
                                     list->bytes, NULL, &special_rank, 1, &vocab, &index),
                     TKI_ERR_ARGUMENT, "NULL special_offsets");
        CHECK_STATUS(tki_vocab_build(list->bytes, list->offsets, list->ranks, list->count,
                                     list->bytes, list->offsets, NULL, 1, &vocab, &index),
                     TKI_ERR_ARGUMENT, "NULL special_ranks");
        CHECK(vocab == NULL, "vocab set after a failure");
        /* error_index may be NULL. */
        CHECK_STATUS(tki_vocab_build(list->bytes, list->offsets, list->ranks, list->count, NULL,
                                     NULL, NULL, 0, &vocab, NULL),
                     TKI_OK, "NULL error_index");
        tki_vocab_free(vocab);
        vocab = NULL;
        /* No tokens at all: every byte is missing; built (as tiktoken builds it). */
        uint64_t zero = 0;
        CHECK_STATUS(tki_vocab_build(NULL, &zero, list->ranks, 0, NULL, NULL, NULL, 0, &vocab,
                                     &index),
                     TKI_OK, "no tokens");
        tki_vocab_free(vocab);
        vocab = NULL;
    }
    for (int missing = 0; missing < 256; missing += 85) {
        /* Built, with the heap BPE; a text with that byte alone is refused when encoded. */
        list_init(list, missing);
        list_add(list, "ab", 2, 300);
        tki_vocab *holed = NULL;
        uint32_t holed_index = 0;
        CHECK_STATUS(list_build(list, &holed, &holed_index), TKI_OK, "a missing byte");
        if (holed != NULL) {
            tki_vocab_info holed_info;
            tki_vocab_get_info(holed, &holed_info);
            CHECK(!holed_info.incremental, "missing byte %d: incremental", missing);
            uint8_t text[3] = {'a', 'b', (uint8_t)missing};
            uint32_t ids[3];
            size_t produced = 0, end = 2;
            CHECK_STATUS(tki_encode_pieces(holed, text, 2, &end, 1, 0, ids, 3, &produced), TKI_OK,
                         "encode ab without a byte");
            CHECK(produced == 1 && ids[0] == 300, "ab: %zu ids", produced);
            end = 3;
            CHECK_STATUS(tki_encode_pieces(holed, text, 3, &end, 1, 0, ids, 3, &produced),
                         TKI_ERR_NO_BYTE_TOKEN, "encode the missing byte");
        }
        tki_vocab_free(holed);
    }
    list_init(list, -1);
    list_add(list, "ab", 2, 300);
    list_add(list, "cd", 2, 301);
    list_add(list, "ab", 2, 302);
    EXPECT_BUILD_FAILS(list, TKI_ERR_DUPLICATE_BYTES, 258, "duplicate bytes");
    list_init(list, -1);
    list_add(list, "x", 1, 300);
    EXPECT_BUILD_FAILS(list, TKI_ERR_DUPLICATE_BYTES, 256, "a duplicate single byte");
    list_init(list, -1);
    list_add(list, "ab", 2, 300);
    list_add(list, "cd", 2, 300);
    EXPECT_BUILD_FAILS(list, TKI_ERR_DUPLICATE_RANK, 257, "duplicate ranks");
    list_init(list, -1);
    list_add(list, "ab", 2, 10 + 'q');
    EXPECT_BUILD_FAILS(list, TKI_ERR_DUPLICATE_RANK, 256, "a token with a byte's rank");
    list_init(list, -1);
    list_add(list, "ab", 2, 300);
    list_add(list, "", 0, 301);
    EXPECT_BUILD_FAILS(list, TKI_ERR_EMPTY_TOKEN, 257, "an empty token");
    list_init(list, -1);
    list_add(list, "ab", 2, UINT32_MAX);
    EXPECT_BUILD_FAILS(list, TKI_ERR_ARGUMENT, 256, "rank UINT32_MAX");
    {
        /* A special token clashing with a mergeable rank, or with another special. */
        list_init(list, -1);
        list_add(list, "ab", 2, 300);
        uint8_t special_bytes[] = "<s></s>";
        uint64_t special_offsets[3] = {0, 3, 7};
        uint32_t special_ranks[2] = {400, 300};
        tki_vocab *vocab = NULL;
        uint32_t index = 0;
        CHECK_STATUS(tki_vocab_build(list->bytes, list->offsets, list->ranks, list->count,
                                     special_bytes, special_offsets, special_ranks, 2, &vocab,
                                     &index),
                     TKI_ERR_DUPLICATE_RANK, "a special with a mergeable rank");
        CHECK(index == list->count + 1, "special clash: error_index %u, want %u", index,
              list->count + 1);
        CHECK(vocab == NULL, "vocab set after a failure");
        special_ranks[1] = 400;
        CHECK_STATUS(tki_vocab_build(list->bytes, list->offsets, list->ranks, list->count,
                                     special_bytes, special_offsets, special_ranks, 2, &vocab,
                                     &index),
                     TKI_ERR_DUPLICATE_RANK, "two specials with one rank");
        CHECK(index == list->count + 1, "special clash: error_index %u, want %u", index,
              list->count + 1);
        special_ranks[1] = UINT32_MAX;
        CHECK_STATUS(tki_vocab_build(list->bytes, list->offsets, list->ranks, list->count,
                                     special_bytes, special_offsets, special_ranks, 2, &vocab,
                                     &index),
                     TKI_ERR_ARGUMENT, "a special with rank UINT32_MAX");
        CHECK(vocab == NULL, "vocab set after a failure");
    }
    case_end();

    /* A good vocabulary with holes (ranks 0..9 and 303..399 are no tokens) and a special. */
    list_init(list, -1);
    list_add(list, "ab", 2, 300);
    list_add(list, "abab", 4, 301);
    list_add(list, "ba", 2, 302);
    uint8_t special_bytes[] = "<|end|>";
    uint64_t special_offsets[2] = {0, 7};
    uint32_t special_rank = 400;
    tki_vocab *vocab = NULL;
    uint32_t index = 0;
    int32_t status = tki_vocab_build(list->bytes, list->offsets, list->ranks, list->count,
                                     special_bytes, special_offsets, &special_rank, 1, &vocab,
                                     &index);
    case_begin("errors: a good vocabulary with holes");
    CHECK_STATUS(status, TKI_OK, "build");
    case_end();
    if (status != TKI_OK) {
        free(list);
        return;
    }
    const uint8_t text[] = "abab ba!";
    size_t len = sizeof(text) - 1;
    uint32_t out[16];
    size_t ends[16];
    size_t count = 0, bad = 0;

    case_begin("errors: encode_pieces");
    ends[0] = len;
    CHECK_STATUS(tki_encode_pieces(NULL, text, len, ends, 1, 0, out, 16, &count),
                 TKI_ERR_ARGUMENT, "NULL vocab");
    CHECK_STATUS(tki_encode_pieces(vocab, NULL, len, ends, 1, 0, out, 16, &count),
                 TKI_ERR_ARGUMENT, "NULL data");
    CHECK_STATUS(tki_encode_pieces(vocab, text, len, NULL, 1, 0, out, 16, &count),
                 TKI_ERR_ARGUMENT, "NULL piece_ends");
    CHECK_STATUS(tki_encode_pieces(vocab, text, len, ends, 1, 0, NULL, 16, &count),
                 TKI_ERR_ARGUMENT, "NULL out");
    CHECK_STATUS(tki_encode_pieces(vocab, text, len, ends, 1, 0, out, 16, NULL),
                 TKI_ERR_ARGUMENT, "NULL out_count");
    CHECK_STATUS(tki_encode_pieces(vocab, text, len, ends, 1, 0, out, len - 1, &count),
                 TKI_ERR_ARGUMENT, "out_capacity < data_len");
    ends[0] = len - 1;
    CHECK_STATUS(tki_encode_pieces(vocab, text, len, ends, 1, 0, out, 16, &count),
                 TKI_ERR_ARGUMENT, "pieces that do not reach the end");
    ends[0] = 4;
    ends[1] = 2;
    ends[2] = len;
    CHECK_STATUS(tki_encode_pieces(vocab, text, len, ends, 3, 0, out, 16, &count),
                 TKI_ERR_ARGUMENT, "descending piece ends");
    ends[0] = len + 1;
    CHECK_STATUS(tki_encode_pieces(vocab, text, len, ends, 1, 0, out, 16, &count),
                 TKI_ERR_ARGUMENT, "a piece end past the data");
    CHECK_STATUS(tki_encode_pieces(vocab, text, len, ends, 0, 0, out, 16, &count),
                 TKI_ERR_ARGUMENT, "no pieces for non-empty data");
    count = 99;
    CHECK_STATUS(tki_encode_pieces(vocab, NULL, 0, NULL, 0, 0, NULL, 0, &count), TKI_OK,
                 "empty data");
    CHECK(count == 0, "empty data gives %zu ids", count);
    ends[0] = 0;
    ends[1] = 4;
    ends[2] = 4;
    ends[3] = len;
    CHECK_STATUS(tki_encode_pieces(vocab, text, len, ends, 4, TKI_WHOLE_PIECE_SHORTCUT, out, len,
                                   &count),
                 TKI_OK, "empty pieces");
    CHECK(count == 4 && out[0] == 301 && out[2] == 302, "empty pieces: %zu ids", count);
    case_end();

    case_begin("errors: encode_text and pretokenize");
    CHECK_STATUS(tki_encode_text(NULL, TKI_PATTERN_CL100K, text, len, 0, out, 16, &count, NULL),
                 TKI_ERR_ARGUMENT, "NULL vocab");
    CHECK_STATUS(tki_encode_text(vocab, TKI_PATTERN_CL100K, NULL, len, 0, out, 16, &count, NULL),
                 TKI_ERR_ARGUMENT, "NULL data");
    CHECK_STATUS(tki_encode_text(vocab, TKI_PATTERN_CL100K, text, len, 0, NULL, 16, &count, NULL),
                 TKI_ERR_ARGUMENT, "NULL out");
    CHECK_STATUS(tki_encode_text(vocab, TKI_PATTERN_CL100K, text, len, 0, out, 16, NULL, NULL),
                 TKI_ERR_ARGUMENT, "NULL out_count");
    CHECK_STATUS(tki_encode_text(vocab, TKI_PATTERN_CL100K, text, len, 0, out, len - 1, &count,
                                 NULL),
                 TKI_ERR_ARGUMENT, "out_capacity < data_len");
    static const int32_t bad_patterns[] = {0, 4, -1, 1000};
    for (size_t k = 0; k < 4; k++) {
        CHECK_STATUS(tki_encode_text(vocab, bad_patterns[k], text, len, 0, out, 16, &count, NULL),
                     TKI_ERR_ARGUMENT, "unknown pattern (encode_text)");
        CHECK_STATUS(tki_pretokenize(bad_patterns[k], text, len, ends, 16, &count),
                     TKI_ERR_ARGUMENT, "unknown pattern (pretokenize)");
    }
    size_t last = 99;
    count = 99;
    CHECK_STATUS(tki_encode_text(vocab, TKI_PATTERN_O200K, NULL, 0, 0, NULL, 0, &count, &last),
                 TKI_OK, "empty text");
    CHECK(count == 0 && last == 0, "empty text: %zu ids, last piece %zu", count, last);
    CHECK_STATUS(tki_pretokenize(TKI_PATTERN_R50K, NULL, len, ends, 16, &count), TKI_ERR_ARGUMENT,
                 "pretokenize NULL data");
    CHECK_STATUS(tki_pretokenize(TKI_PATTERN_R50K, text, len, NULL, 16, &count), TKI_ERR_ARGUMENT,
                 "pretokenize NULL piece_ends");
    CHECK_STATUS(tki_pretokenize(TKI_PATTERN_R50K, text, len, ends, 16, NULL), TKI_ERR_ARGUMENT,
                 "pretokenize NULL out_count");
    CHECK_STATUS(tki_pretokenize(TKI_PATTERN_R50K, text, len, ends, 1, &count), TKI_ERR_ARGUMENT,
                 "pretokenize capacity too small");
    CHECK_STATUS(tki_pretokenize(TKI_PATTERN_R50K, NULL, 0, NULL, 0, &count), TKI_OK,
                 "pretokenize empty");
    CHECK(count == 0, "pretokenize empty: %zu pieces", count);
    case_end();

    /* pretokenize_ascii.h reads ASCII classes from block 0 of the generated tables. */
    case_begin("unicode tables: ASCII is block 0");
    CHECK(tki_unicode_stage1[0] == 0, "code points 0..127 are in block %u", (unsigned)tki_unicode_stage1[0]);
    CHECK(tki_unicode_stage2[0]['a'] & TKI_CLASS_LOWER_LIKE, "'a' is not in W");
    case_end();

    /* The pre-tokenizer takes runs of the byte triples tki_is_ideograph accepts as letters
     * of class Lo without a lookup: every triple it accepts must be a valid sequence of a
     * code point of exactly that class, and every ideograph of the ranges it names accepted. */
    case_begin("unicode tables: the ideographs recognised from their bytes are Lo");
    {
        size_t accepted = 0;
        for (uint32_t triple = 0; triple < (1u << 24); triple++) {
            const uint8_t s[3] = {(uint8_t)(triple >> 16), (uint8_t)(triple >> 8), (uint8_t)triple};
            if (!tki_is_ideograph(s)) {
                continue;
            }
            accepted++;
            int valid = s[0] >= 0xE0 && s[0] < 0xF0 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80;
            uint32_t cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
            valid = valid && cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);
            if (!valid || tki_unicode_class(cp) != TKI_IDEOGRAPH_CLASS) {
                CHECK(0, "bytes %02X %02X %02X: U+%04X of class %u taken as an ideograph", s[0], s[1],
                      s[2], (unsigned)cp, (unsigned)tki_unicode_class(cp));
                break;
            }
        }
        CHECK(accepted == (0x4DC0 - 0x4000) + (0xA000 - 0x4E00), "%zu triples accepted", accepted);
    }
    case_end();

    /* The windows take two-byte letters sixteen code points at a time (tki_two_byte_groups,
     * generated with the class tables): each group's code must be what its sixteen code
     * points are, by the rule the generator states, restated here from the class table. */
    case_begin("unicode tables: the two-byte groups are what their code points are");
    for (uint32_t o200k = 0; o200k < 2; o200k++) {
        for (uint32_t k = 0; k < 8; k++) {
            for (uint32_t n = 0; n < 16; n++) {
                const uint32_t lead = 0xC0 + 16 * (k >> 2) + n, first = ((lead & 0x1F) << 6) | (16 * (k & 3));
                const uint32_t code = two_byte_group_code(first, o200k);
                CHECK(tki_two_byte_groups[o200k][k][n] == code, "o200k %u, U+%04X..U+%04X: group %u, want %u",
                      (unsigned)o200k, (unsigned)first, (unsigned)first + 15,
                      (unsigned)tki_two_byte_groups[o200k][k][n], (unsigned)code);
            }
        }
    }
    case_end();

    /* The three-byte pass of a window takes each character's class by its kind
     * (tki_wide_kind_of_class, collected per kind and applied once): for every three-byte
     * sequence, at an offset that moves with it (up to the last that holds it whole), the
     * masks must be what tki_wide_class makes of its code point's class; an overlong form
     * or a surrogate stays high, and no other bit of the window changes. */
    case_begin("windows: every three-byte sequence classified as tki_wide_class says");
    {
        uint8_t window[TKI_BLOCK_BYTES];
        uint32_t reported = 0;
        for (uint32_t o200k = 0; o200k < 2 && reported == 0; o200k++) {
            for (uint32_t sequence = 0; sequence < 16 * 64 * 64 && reported == 0; sequence++) {
                const uint8_t s0 = (uint8_t)(0xE0 + (sequence >> 12)), s1 = (uint8_t)(0x80 + ((sequence >> 6) & 63)),
                              s2 = (uint8_t)(0x80 + (sequence & 63));
                const uint32_t at = sequence % (TKI_BLOCK_BYTES - 2);
                memset(window, 'a', sizeof(window));
                window[at] = s0;
                window[at + 1] = s1;
                window[at + 2] = s2;
                tki_block_classes c;
                tki_block_classify(window, TKI_BLOCK_BYTES, &c);
                const tki_block_classes before = c;
                uint64_t continuation = 0, both = 0, marks = 0;
                tki_block_classify_wide(window, TKI_BLOCK_BYTES, (int)o200k, &c, &continuation, &both, &marks);
                const uint8_t three[3] = {s0, s1, s2};
                const uint32_t code_point = tki_three_byte_code_point(three);
                const uint64_t first = (uint64_t)1 << at, character = (uint64_t)7 << at;
                tki_wide_masks want = {before.letter, before.upper, 0, before.number, before.space, 0};
                uint64_t want_high = before.high, want_continuation = 0;
                if (code_point != 0) {
                    tki_wide_class(&want, tki_unicode_class(code_point), first, (int)o200k);
                    want_high &= ~character;
                    want_continuation = character & ~first;
                }
                if (c.letter != want.letter || c.upper != want.upper || c.number != want.number ||
                    c.space != want.space || both != want.both || marks != want.mark || c.high != want_high ||
                    (continuation & ~want_high) != want_continuation) {
                    CHECK(0, "o200k %u, bytes %02X %02X %02X at %u (U+%04X): letter %016llx upper %016llx "
                          "both %016llx mark %016llx high %016llx", (unsigned)o200k, s0, s1, s2, (unsigned)at,
                          (unsigned)code_point, (unsigned long long)c.letter, (unsigned long long)c.upper,
                          (unsigned long long)both, (unsigned long long)marks, (unsigned long long)c.high);
                    reported = 1;
                }
            }
        }
    }
    case_end();

#if defined(TKI_BLOCK_AVX2)
    /* ... and the AVX2 lookup of a window finds each two-byte sequence at every offset as the
     * groups say, reading no byte past the window (a character its last byte starts: none). */
    case_begin("windows: two-byte groups looked up with AVX2");
    if (__builtin_cpu_supports("avx2")) {
        uint8_t window[TKI_BLOCK_BYTES];
        for (uint32_t o200k = 0; o200k < 2; o200k++) {
            for (uint32_t lead = 0xC0; lead < 0xE0; lead++) {
                for (uint32_t second = 0; second < 256; second++) {
                    const uint32_t cp = ((lead & 0x1F) << 6) | (second & 0x3F);
                    const int valid = lead >= 0xC2 && (second & 0xC0) == 0x80;
                    const uint32_t code = valid ? two_byte_group_code(cp & ~15u, o200k) : 0;
                    for (uint32_t at = 0; at < TKI_BLOCK_BYTES; at++) {
                        memset(window, 'a', sizeof(window));
                        window[at] = (uint8_t)lead;
                        if (at + 1 < TKI_BLOCK_BYTES) {
                            window[at + 1] = (uint8_t)second;
                        }
                        const uint64_t bit = code != 0 && at + 1 < TKI_BLOCK_BYTES ? (uint64_t)1 << at : 0;
                        uint64_t capital = 0, both = 0;
                        const uint64_t grouped = tki_block_two_byte_avx2(window, (int)o200k, &capital, &both);
                        if (grouped != bit || capital != (code == TKI_GROUP_CAPITAL ? bit : 0) ||
                            both != (code == TKI_GROUP_BOTH ? bit : 0)) {
                            CHECK(0, "o200k %u, bytes %02X %02X at %u: %016llx %016llx %016llx", (unsigned)o200k,
                                  (unsigned)lead, (unsigned)second, (unsigned)at, (unsigned long long)grouped,
                                  (unsigned long long)capital, (unsigned long long)both);
                            lead = 0xE0; /* (one report) */
                            break;
                        }
                    }
                    if (lead == 0xE0) {
                        break;
                    }
                }
            }
        }
    }
    case_end();
#endif

    case_begin("errors: prefix_last_tokens");
    CHECK_STATUS(tki_prefix_last_tokens(NULL, text, len, 0, out), TKI_ERR_ARGUMENT, "NULL vocab");
    CHECK_STATUS(tki_prefix_last_tokens(vocab, NULL, len, 0, out), TKI_ERR_ARGUMENT, "NULL data");
    CHECK_STATUS(tki_prefix_last_tokens(vocab, text, len, 0, NULL), TKI_ERR_ARGUMENT, "NULL out");
    CHECK_STATUS(tki_prefix_last_tokens(vocab, text, len, TKI_METHOD_HEAP, out), TKI_ERR_ARGUMENT,
                 "heap flag");
    CHECK_STATUS(tki_prefix_last_tokens(vocab, text, len, TKI_WHOLE_PIECE_SHORTCUT, out),
                 TKI_ERR_ARGUMENT, "shortcut flag");
    CHECK_STATUS(tki_prefix_last_tokens(vocab, NULL, 0, 0, NULL), TKI_OK, "empty");
    case_end();

    case_begin("errors: token_rank and token_bytes");
    uint32_t rank = 0;
    const uint8_t *bytes = NULL;
    size_t bytes_len = 0;
    CHECK_STATUS(tki_token_rank(NULL, text, 2, &rank), TKI_ERR_ARGUMENT, "NULL vocab");
    CHECK_STATUS(tki_token_rank(vocab, NULL, 2, &rank), TKI_ERR_ARGUMENT, "NULL bytes");
    CHECK_STATUS(tki_token_rank(vocab, text, 2, NULL), TKI_ERR_ARGUMENT, "NULL out_rank");
    CHECK_STATUS(tki_token_rank(vocab, text, 0, &rank), TKI_ERR_UNKNOWN_TOKEN, "empty bytes");
    CHECK_STATUS(tki_token_rank(vocab, text, 3, &rank), TKI_ERR_UNKNOWN_TOKEN, "\"aba\"");
    CHECK_STATUS(tki_token_rank(vocab, special_bytes, 7, &rank), TKI_ERR_UNKNOWN_TOKEN,
                 "a special is not mergeable");
    CHECK_STATUS(tki_token_rank(vocab, text, 4, &rank), TKI_OK, "\"abab\"");
    CHECK(rank == 301, "\"abab\" has rank %u", rank);
    CHECK_STATUS(tki_token_bytes(NULL, 300, &bytes, &bytes_len), TKI_ERR_ARGUMENT, "NULL vocab");
    CHECK_STATUS(tki_token_bytes(vocab, 300, NULL, &bytes_len), TKI_ERR_ARGUMENT, "NULL out");
    CHECK_STATUS(tki_token_bytes(vocab, 300, &bytes, NULL), TKI_ERR_ARGUMENT, "NULL out_len");
    static const uint32_t unknown[] = {0, 9, 303, 399, 401, 100000, UINT32_MAX - 1, UINT32_MAX};
    for (size_t k = 0; k < sizeof(unknown) / sizeof(unknown[0]); k++) {
        CHECK_STATUS(tki_token_bytes(vocab, unknown[k], &bytes, &bytes_len),
                     TKI_ERR_UNKNOWN_TOKEN, "bytes of an unknown rank");
    }
    CHECK_STATUS(tki_token_bytes(vocab, 400, &bytes, &bytes_len), TKI_OK, "special bytes");
    CHECK(bytes_len == 7 && memcmp(bytes, "<|end|>", 7) == 0, "special bytes differ");
    case_end();

    case_begin("errors: decode");
    uint32_t ids[6] = {301, 10 + ' ', 302, 400, 10 + '!', 300};
    uint8_t decoded[32];
    size_t decoded_len = 0;
    CHECK_STATUS(tki_decoded_length(NULL, ids, 6, &decoded_len, &bad), TKI_ERR_ARGUMENT,
                 "NULL vocab");
    CHECK_STATUS(tki_decoded_length(vocab, NULL, 6, &decoded_len, &bad), TKI_ERR_ARGUMENT,
                 "NULL tokens");
    CHECK_STATUS(tki_decoded_length(vocab, ids, 6, NULL, &bad), TKI_ERR_ARGUMENT, "NULL out_len");
    CHECK_STATUS(tki_decoded_length(vocab, ids, 6, &decoded_len, NULL), TKI_ERR_ARGUMENT,
                 "NULL bad_index");
    CHECK_STATUS(tki_decoded_length(vocab, ids, 6, &decoded_len, &bad), TKI_OK, "decoded_length");
    CHECK(decoded_len == 17, "decoded_length %zu, want 17", decoded_len);
    CHECK_STATUS(tki_decode(NULL, ids, 6, decoded, 32, &decoded_len, &bad), TKI_ERR_ARGUMENT,
                 "NULL vocab");
    CHECK_STATUS(tki_decode(vocab, NULL, 6, decoded, 32, &decoded_len, &bad), TKI_ERR_ARGUMENT,
                 "NULL tokens");
    CHECK_STATUS(tki_decode(vocab, ids, 6, NULL, 32, &decoded_len, &bad), TKI_ERR_ARGUMENT,
                 "NULL out");
    CHECK_STATUS(tki_decode(vocab, ids, 6, decoded, 32, NULL, &bad), TKI_ERR_ARGUMENT,
                 "NULL out_len");
    CHECK_STATUS(tki_decode(vocab, ids, 6, decoded, 32, &decoded_len, NULL), TKI_ERR_ARGUMENT,
                 "NULL bad_index");
    CHECK_STATUS(tki_decode(vocab, ids, 6, decoded, 32, &decoded_len, &bad), TKI_OK, "decode");
    CHECK(decoded_len == 17 && memcmp(decoded, "abab ba<|end|>!ab", 17) == 0, "decode: %.*s",
          (int)decoded_len, (const char *)decoded);
    CHECK_STATUS(tki_decode(vocab, NULL, 0, NULL, 0, &decoded_len, &bad), TKI_OK, "decode nothing");
    CHECK(decoded_len == 0, "decode nothing: %zu bytes", decoded_len);
    for (size_t capacity = 0; capacity < 17; capacity++) {
        uint8_t *exact = checked_malloc(capacity);
        CHECK_STATUS(tki_decode(vocab, ids, 6, exact, capacity, &decoded_len, &bad),
                     TKI_ERR_ARGUMENT, "decode into too small a buffer");
        free(exact);
    }
    for (size_t k = 0; k < sizeof(unknown) / sizeof(unknown[0]); k++) {
        for (size_t position = 0; position < 6; position++) {
            uint32_t with_unknown[6];
            memcpy(with_unknown, ids, sizeof(ids));
            with_unknown[position] = unknown[k];
            bad = 777;
            CHECK_STATUS(tki_decoded_length(vocab, with_unknown, 6, &decoded_len, &bad),
                         TKI_ERR_UNKNOWN_TOKEN, "decoded_length of an unknown id");
            CHECK(bad == position, "decoded_length: bad_index %zu, want %zu", bad, position);
            bad = 777;
            CHECK_STATUS(tki_decode(vocab, with_unknown, 6, decoded, 32, &decoded_len, &bad),
                         TKI_ERR_UNKNOWN_TOKEN, "decode of an unknown id");
            CHECK(bad == position, "decode: bad_index %zu, want %zu", bad, position);
        }
    }
    case_end();

    case_begin("errors: free and info tolerate NULL");
    tki_vocab_info info;
    memset(&info, 0xAB, sizeof(info));
    tki_vocab_free(NULL);
    tki_vocab_get_info(NULL, &info);
    tki_vocab_get_info(vocab, NULL);
    tki_vocab_get_info(vocab, &info);
    CHECK(info.token_count == 259 && info.special_count == 1 && info.max_rank == 400,
          "info: %u tokens, %u specials, max rank %u", info.token_count, info.special_count,
          info.max_rank);
    case_end();
    tki_vocab_free(vocab);

    /* An improper vocabulary is properized: incremental, prefix_last_tokens works. */
    case_begin("improper vocabulary: new priorities, incremental");
    list_init(list, -1);
    list_add(list, "ab", 2, 301); /* "abc" = "a" + "bc" merges bc (300) then abc (299)... */
    list_add(list, "bc", 2, 300);
    list_add(list, "abc", 3, 299); /* ... so its merges go down in rank: improper */
    status = list_build(list, &vocab, &index);
    CHECK_STATUS(status, TKI_OK, "build");
    if (status == TKI_OK) {
        tki_vocab_get_info(vocab, &info);
        CHECK(info.incremental == 1 && info.improper_count == 1 && info.moved_rules == 1 &&
                  info.watched_tokens == 0 && info.properization_rejects == 0,
              "incremental %u, improper %u, moved %u, watched %u", info.incremental,
              info.improper_count, info.moved_rules, info.watched_tokens);
        CHECK_STATUS(tki_prefix_last_tokens(vocab, (const uint8_t *)"abc", 3, 0, out), TKI_OK,
                     "prefix_last_tokens");
        CHECK(out[0] == 'a' + 10 && out[1] == 301 && out[2] == 299, "abc: prefix tokens %u %u %u",
              out[0], out[1], out[2]);
        size_t end = 3;
        CHECK_STATUS(tki_encode_pieces(vocab, (const uint8_t *)"abc", 3, &end, 1, 0, out, 3,
                                       &count),
                     TKI_OK, "encode_pieces");
        CHECK(count == 1 && out[0] == 299, "abc: %zu ids", count);
        tki_vocab_free(vocab);
    }
    case_end();

    /* A vocabulary that is not incremental (no byte 'z'): prefix_last_tokens refuses it. */
    case_begin("errors: prefix_last_tokens on a heap-only vocabulary");
    list_init(list, 'z');
    list_add(list, "ab", 2, 301);
    status = list_build(list, &vocab, &index);
    CHECK_STATUS(status, TKI_OK, "build");
    if (status == TKI_OK) {
        tki_vocab_get_info(vocab, &info);
        CHECK(info.incremental == 0, "incremental %u", info.incremental);
        CHECK_STATUS(tki_prefix_last_tokens(vocab, (const uint8_t *)"abc", 3, 0, out),
                     TKI_ERR_ARGUMENT, "prefix_last_tokens");
        tki_vocab_free(vocab);
    }
    case_end();
    free(list);
}

/*
 * Inputs that once crashed the core (offsets going backwards).  The header
 * promises a status, never a crash, and nothing read or written outside the
 * buffers.
 */
static void crash_cases(void) {
    token_list *list = checked_calloc(1, sizeof(token_list));
    case_begin("crash case: token_offsets going backwards");
    list_init(list, -1);
    list_add(list, "abcdefghijklmnopqrstuvwxyz0123456789", 36, 300);
    list_add(list, "xy", 2, 301);
    list->offsets[list->count] = list->offsets[list->count - 1] - 30; /* ends before it starts */
    EXPECT_BUILD_FAILS(list, TKI_ERR_ARGUMENT, 257, "descending token offsets");
    case_end();

    case_begin("crash case: last token offset below the first");
    list_init(list, -1);
    memmove(list->bytes + 1, list->bytes, 256);
    for (uint32_t i = 0; i < 256; i++) {
        list->offsets[i] = i + 1;
    }
    list->offsets[256] = 0; /* the pool size offsets[256] - offsets[0] wraps around */
    EXPECT_BUILD_FAILS(list, TKI_ERR_ARGUMENT, 255, "last offset below the first");
    case_end();
    free(list);
}

/* ------------------------------------------------------------------ rank files */

/*
 * The rank file of test_bad_vocab.py: the 256 single bytes (rank = byte),
 * then "ab" 256 and "abc" 257, one per line; `extra` (may be NULL) is
 * inserted before line `at` (1-based; past the end appends it).
 */
static size_t base_rank_file(char *out, size_t capacity, const char *extra, uint32_t at) {
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t used = 0;
    for (uint32_t line = 1; line <= 260; line++) {
        if (extra != NULL && line == at) {
            used += (size_t)snprintf(out + used, capacity - used, "%s\n", extra);
        }
        if (line <= 256) {
            uint32_t byte = line - 1;
            used += (size_t)snprintf(out + used, capacity - used, "%c%c== %u\n",
                                     digits[byte >> 2], digits[(byte & 3) << 4], byte);
        } else if (line == 257) {
            used += (size_t)snprintf(out + used, capacity - used, "YWI= 256\n");
        } else if (line == 258) {
            used += (size_t)snprintf(out + used, capacity - used, "YWJj 257\n");
        }
    }
    return used;
}

typedef struct rank_file_case {
    const char *name;
    const char *line;     /* the defect (NUL-free; see below for the NUL case) */
    uint32_t at;          /* where it goes: before line `at` (260: appended) */
    int32_t status;
    uint64_t want_line;
    uint64_t want_earlier;
} rank_file_case;

static void check_rank_file_error(const char *name, const uint8_t *text, size_t len,
                                  int32_t want_status, uint64_t want_line,
                                  uint64_t want_earlier) {
    case_begin("rank file: %s", name);
    tki_rank_list list;
    tki_rank_file_error error;
    memset(&list, 0xab, sizeof(list));
    int32_t status = tki_rank_file_parse(text, len, &list, &error);
    CHECK_STATUS(status, want_status, "tki_rank_file_parse");
    CHECK(list.bytes == NULL && list.offsets == NULL && list.ranks == NULL && list.lines == NULL &&
              list.count == 0,
          "the list is not empty after a failure");
    CHECK(error.line == want_line, "line %llu, want %llu", (unsigned long long)error.line,
          (unsigned long long)want_line);
    CHECK(error.earlier_line == want_earlier, "earlier line %llu, want %llu",
          (unsigned long long)error.earlier_line, (unsigned long long)want_earlier);
    if (want_line > 0) {
        /* line_start .. line_end is that line, '\r' included, '\n' not. */
        uint64_t line = 1;
        size_t start = 0;
        for (; start < len && line < want_line; start++) {
            line += text[start] == '\n';
        }
        size_t end = start;
        while (end < len && text[end] != '\n') {
            end++;
        }
        CHECK(error.line_start == start && error.line_end == end,
              "line bytes [%llu, %llu), want [%zu, %zu)", (unsigned long long)error.line_start,
              (unsigned long long)error.line_end, start, end);
    }
    /* Building from the file reports the same problem (the vocabulary is fine otherwise). */
    tki_vocab *vocab = (tki_vocab *)&g_rng;
    tki_rank_file_error build_error;
    status = tki_vocab_build_from_rank_file(text, len, NULL, NULL, NULL, 0, &vocab, &build_error,
                                            NULL);
    CHECK_STATUS(status, want_status, "tki_vocab_build_from_rank_file");
    CHECK(vocab == NULL, "*out_vocab not NULL after a failure");
    CHECK(build_error.line == want_line && build_error.earlier_line == want_earlier,
          "build: line %llu (earlier %llu)", (unsigned long long)build_error.line,
          (unsigned long long)build_error.earlier_line);
    case_end();
}

static void run_rank_file_tests(void) {
    size_t capacity = 1 << 16;
    char *text = checked_malloc(capacity);
    size_t len = base_rank_file(text, capacity, NULL, 0);

    case_begin("rank file: the base file");
    tki_rank_list list;
    tki_rank_file_error error;
    CHECK_STATUS(tki_rank_file_parse((const uint8_t *)text, len, &list, &error), TKI_OK, "parse");
    CHECK(list.count == 258, "%u tokens", list.count);
    for (uint32_t i = 0; i < list.count && i < 258; i++) {
        uint64_t length = list.offsets[i + 1] - list.offsets[i];
        CHECK(list.ranks[i] == i && list.lines[i] == i + 1, "token %u: rank %u, line %llu", i,
              list.ranks[i], (unsigned long long)list.lines[i]);
        if (i < 256) {
            CHECK(length == 1 && list.bytes[list.offsets[i]] == i, "token %u: wrong bytes", i);
        }
    }
    CHECK(list.offsets[257] - list.offsets[256] == 2 &&
              memcmp(list.bytes + list.offsets[256], "ab", 2) == 0 &&
              list.offsets[258] - list.offsets[257] == 3 &&
              memcmp(list.bytes + list.offsets[257], "abc", 3) == 0,
          "ab / abc decoded wrongly");
    tki_rank_list_free(&list);
    tki_rank_list_free(&list); /* twice is harmless */
    tki_rank_list_free(NULL);
    case_end();

    case_begin("rank file: blank lines, CRLF, padding, leading zeros");
    {
        static const char file[] =
            "\n\r\nYWI= 0256\r\n\nYWJj== 257\nYWJjZA== 258\r\nYWJjZGU= 259\n"
            "YWJjZGVm= 260\nYWJjZGVmZw== 4294967294";
        CHECK_STATUS(tki_rank_file_parse((const uint8_t *)file, sizeof(file) - 1, &list, &error),
                     TKI_OK, "parse");
        static const char *want_tokens[6] = {"ab", "abc", "abcd", "abcde", "abcdef", "abcdefg"};
        static const uint32_t want_ranks[6] = {256, 257, 258, 259, 260, 4294967294u};
        static const uint64_t want_lines[6] = {3, 5, 6, 7, 8, 9};
        CHECK(list.count == 6, "%u tokens", list.count);
        for (uint32_t i = 0; i < list.count && i < 6; i++) {
            size_t length = strlen(want_tokens[i]);
            CHECK(list.offsets[i + 1] - list.offsets[i] == length &&
                      memcmp(list.bytes + list.offsets[i], want_tokens[i], length) == 0 &&
                      list.ranks[i] == want_ranks[i] && list.lines[i] == want_lines[i],
                  "token %u: wrong bytes, rank %u or line %llu", i, list.ranks[i],
                  (unsigned long long)list.lines[i]);
        }
        tki_rank_list_free(&list);
    }
    case_end();

    case_begin("rank file: NULL arguments");
    CHECK_STATUS(tki_rank_file_parse(NULL, 5, &list, &error), TKI_ERR_ARGUMENT, "NULL text");
    CHECK_STATUS(tki_rank_file_parse((const uint8_t *)text, len, NULL, &error), TKI_ERR_ARGUMENT,
                 "NULL list");
    CHECK_STATUS(tki_rank_file_parse((const uint8_t *)text, len, &list, NULL), TKI_OK,
                 "NULL error");
    tki_rank_list_free(&list);
    CHECK_STATUS(tki_vocab_build_from_rank_file((const uint8_t *)text, len, NULL, NULL, NULL, 0,
                                                NULL, NULL, NULL),
                 TKI_ERR_ARGUMENT, "NULL out_vocab");
    case_end();

    static const rank_file_case cases[] = {
        {"malformed base64", "YQ=x= 300", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"base64 of a bad length", "YWJjZ 300", 101, TKI_ERR_BAD_BASE64, 101, 0},
        {"missing padding", "YWJjZA 300", 101, TKI_ERR_BAD_BASE64, 101, 0},
        {"one pad short", "YWJjZA= 300", 101, TKI_ERR_BAD_BASE64, 101, 0},
        {"three pads", "YQ=== 300", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"missing rank", "eHl6", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"missing rank, trailing space", "eHl6 ", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"non-integer rank", "eHl6 12a", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"fractional rank", "eHl6 1.5", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"negative rank", "eHl6 -5", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"three fields", "eHl6 300 1", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"tab separator", "eHl6\t300", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"leading space", " eHl6 300", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"plus sign", "eHl6 +300", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"underscore in the rank", "eHl6 3_00", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"whitespace-only line", "  ", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"two carriage returns", "eHl6 300\r\r", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"no token", " 300", 101, TKI_ERR_MALFORMED_LINE, 101, 0},
        {"duplicate bytes", "YWI= 300", 260, TKI_ERR_DUPLICATE_BYTES, 259, 257},
        {"duplicate rank", "eHk= 256", 260, TKI_ERR_DUPLICATE_RANK, 259, 257},
        {"duplicate bytes before a duplicate rank", "YWI= 256", 260, TKI_ERR_DUPLICATE_BYTES,
         259, 257},
        {"rank 2^32 - 1", "eHl6 4294967295", 101, TKI_ERR_RANK_RANGE, 101, 0},
        {"rank far too large", "eHl6 99999999999999999999999999", 101, TKI_ERR_RANK_RANGE, 101,
         0},
        {"a malformed line after a rank too large", "eHl6 4294967296\nYQ=x= 301", 101,
         TKI_ERR_MALFORMED_LINE, 102, 0},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        len = base_rank_file(text, capacity, cases[c].line, cases[c].at);
        check_rank_file_error(cases[c].name, (const uint8_t *)text, len, cases[c].status,
                              cases[c].want_line, cases[c].want_earlier);
    }
    /* Files cut short (no final '\n'), and other whole-file cases. */
    len = base_rank_file(text, capacity, NULL, 0);
    memcpy(text + len, "aGVsb", 5);
    check_rank_file_error("cut mid-base64", (const uint8_t *)text, len + 5,
                          TKI_ERR_MALFORMED_LINE, 259, 0);
    memcpy(text + len, "aGVsbG8= ", 9);
    check_rank_file_error("cut after the space", (const uint8_t *)text, len + 9,
                          TKI_ERR_MALFORMED_LINE, 259, 0);
    memcpy(text + len, "aGVsbG8= 3", 10);
    check_rank_file_error("cut mid-rank", (const uint8_t *)text, len + 10, TKI_ERR_DUPLICATE_RANK,
                          259, 4);
    memcpy(text + len, "aGVsbG8= 300\r", 13);
    check_rank_file_error("a final '\\r' without '\\n'", (const uint8_t *)text, len + 13,
                          TKI_ERR_MALFORMED_LINE, 0, 0);
    memcpy(text + len, "\r", 1);
    check_rank_file_error("a final lone '\\r'", (const uint8_t *)text, len + 1,
                          TKI_ERR_MALFORMED_LINE, 0, 0);
    memcpy(text + len, "YQ=x\r", 5);
    check_rank_file_error("a final malformed line with '\\r'", (const uint8_t *)text, len + 5,
                          TKI_ERR_MALFORMED_LINE, 259, 0);
    len = base_rank_file(text, capacity, "eHl6 3#0", 101);
    *strchr(text, '#') = '\0'; /* a NUL inside line 101's rank */
    check_rank_file_error("NUL in the rank", (const uint8_t *)text, len, TKI_ERR_MALFORMED_LINE,
                          101, 0);
    check_rank_file_error("empty file", (const uint8_t *)"", 0, TKI_ERR_NO_TOKENS, 0, 0);
    check_rank_file_error("blank lines only", (const uint8_t *)"\n\r\n\n", 4, TKI_ERR_NO_TOKENS,
                          0, 0);

    case_begin("rank file: build errors name the line");
    {
        /* No b"\x00" (line 1 dropped): built, as tiktoken builds it. */
        len = base_rank_file(text, capacity, NULL, 0);
        const char *second = strchr(text, '\n') + 1;
        size_t cut = (size_t)(second - text);
        tki_vocab *vocab = NULL;
        uint32_t error_index = 0;
        CHECK_STATUS(tki_vocab_build_from_rank_file((const uint8_t *)second, len - cut, NULL, NULL,
                                                    NULL, 0, &vocab, &error, &error_index),
                     TKI_OK, "missing byte");
        tki_vocab_free(vocab);
        vocab = NULL;
        /* A special token on a mergeable token's rank: no line to name. */
        len = base_rank_file(text, capacity, NULL, 0);
        uint64_t special_offsets[2] = {0, 5};
        uint32_t special_rank = 257;
        CHECK_STATUS(tki_vocab_build_from_rank_file((const uint8_t *)text, len,
                                                    (const uint8_t *)"<|x|>", special_offsets,
                                                    &special_rank, 1, &vocab, &error,
                                                    &error_index),
                     TKI_ERR_DUPLICATE_RANK, "special on a mergeable rank");
        CHECK(error_index == 258 && error.line == 0, "special clash: index %u, line %llu",
              error_index, (unsigned long long)error.line);
        /* A token longer than the incremental algorithm takes: built (heap BPE). */
        len = base_rank_file(text, capacity, NULL, 0);
        len += (size_t)snprintf(text + len, capacity - len, "\n");
        for (uint32_t i = 0; i < 1366; i++) {
            memcpy(text + len, "YWFh", 4); /* "aaa" */
            len += 4;
        }
        len += (size_t)snprintf(text + len, capacity - len, " 300\n");
        CHECK_STATUS(tki_vocab_build_from_rank_file((const uint8_t *)text, len, NULL, NULL, NULL,
                                                    0, &vocab, &error, &error_index),
                     TKI_OK, "token too long");
        tki_vocab_free(vocab);
        vocab = NULL;
    }
    case_end();
    free(text);
}

/* ------------------------------------------------------------------ images */

#define TKI_TILE_ID_MASK_FOR_TESTS 0x00ffffffu /* internal.h's TKI_TILE_ID_MASK */

/*
 * Crafted images: each edit below breaks one invariant that the encoders rely
 * on (csrc/image_check.c lists them), the checksum is made to match again
 * (tki_vocab_image_seal), and the image must be refused.  `section` is where
 * each table starts in the image (the pieces' order: pool, offsets, lengths,
 * kinds, hash, flags, rules, with sparse ids the ids, then for an
 * incremental vocabulary automaton, block keys, suffix parents, decomposition
 * starts, decomposition).
 */
typedef struct image_edit {
    const char *what;
    uint32_t section;
    uint64_t at;       /* byte offset in the section of an integer of `width` bytes */
    uint32_t width;    /* 1, 2, 4 or 8, in the machine's byte order */
    uint64_t mask;     /* the bits of it to set (0: all) */
    uint64_t value;
    int incremental_only; /* the table is read only by the incremental encoder */
} image_edit;

static uint64_t read_uint(const uint8_t *at, uint32_t width) {
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    switch (width) {
    case 1: memcpy(&u8, at, 1); return u8;
    case 2: memcpy(&u16, at, 2); return u16;
    case 4: memcpy(&u32, at, 4); return u32;
    default: memcpy(&u64, at, 8); return u64;
    }
}

static void write_uint(uint8_t *at, uint32_t width, uint64_t value) {
    uint8_t u8 = (uint8_t)value;
    uint16_t u16 = (uint16_t)value;
    uint32_t u32 = (uint32_t)value;
    switch (width) {
    case 1: memcpy(at, &u8, 1); break;
    case 2: memcpy(at, &u16, 2); break;
    case 4: memcpy(at, &u32, 4); break;
    default: memcpy(at, &value, 8); break;
    }
}

static void check_crafted_image(uint8_t *image, uint64_t size, const uint64_t *section,
                                uint32_t sections, uint32_t incremental_sections, const image_edit *edit) {
    if (edit->section >= sections || (edit->incremental_only && sections < incremental_sections)) {
        return;
    }
    uint8_t *where = image + section[edit->section] + edit->at;
    uint64_t saved = read_uint(where, edit->width);
    uint64_t mask = edit->mask != 0 ? edit->mask : ~0ull;
    uint64_t edited = (saved & ~mask) | (edit->value & mask);
    write_uint(where, edit->width, edited);
    if (read_uint(where, edit->width) != saved) {
        tki_vocab *read = NULL;
        CHECK_STATUS(tki_vocab_image_seal(image, size), TKI_OK, "seal");
        CHECK_STATUS(tki_vocab_read_image(image, size, &read), TKI_ERR_ARGUMENT, edit->what);
        tki_vocab_free(read);
    }
    write_uint(where, edit->width, saved);
    CHECK_STATUS(tki_vocab_image_seal(image, size), TKI_OK, "seal");
}

/*
 * The edits for a vocabulary whose rank `token` is a canonical token of two or
 * more bytes; `sparse`: its ranks are renumbered (an id table after the rules).
 */
static void check_crafted_images(uint8_t *image, uint64_t size, const uint64_t *section,
                                 uint32_t sections, uint32_t token, int sparse) {
    enum { POOL, OFFSET, LENGTH, KIND, HASH, FLAGS, RULE, AFTER_RULE, ABSENT = 99 };
    const uint32_t IDS = sparse ? AFTER_RULE : ABSENT;
    const uint32_t AUTOMATON = AFTER_RULE + (sparse ? 1 : 0), KEYS = AUTOMATON + 1, PARENT = AUTOMATON + 2,
                   START = AUTOMATON + 3, NODES = AUTOMATON + 4;
    const uint64_t row = 17 * 64;            /* the first row after the root's (block 17) */
    const uint64_t top = 0xff000000u;        /* a row word's top byte */
    const image_edit edits[] = {
        {"a token of no bytes", LENGTH, 4ull * token, 4, 0, 0, 0},
        {"a token past the pool", LENGTH, 4ull * token, 4, 0, 1u << 30, 0},
        {"an offset past the pool", OFFSET, 8ull * token, 8, 0, 1ull << 40, 0},
        {"an unknown kind", KIND, token, 1, 0, 7, 0},
        {"a special that is canonical", KIND, token, 1, 0, 2, 0},
        {"a hash slot holding no token", HASH, 8, 4, 0, 0xfffffffeu, 0},
        {"a hash slot's length wrong", HASH, 12, 4, 0xff, 0xff, 0},
        {"a canonical token's rule of no bytes", RULE, 16ull * token + 12, 2, 0, 0, 1},
        {"a suffix as long as the token", RULE, 16ull * token + 14, 2, 0, 100, 1},
        {"a transition to the root", AUTOMATON, 64, 4, 0, 0, 0},
        {"a transition past the table", AUTOMATON, 64, 4, 0, 0x00ffffffu, 0},
        {"a transition to a tile", AUTOMATON, 64, 4, 0, 1, 0},
        {"a transition with a top byte", AUTOMATON, 64, 4, 0, 0x01000011u, 0},
        {"a tile id naming a row", AUTOMATON, row, 4, TKI_TILE_ID_MASK_FOR_TESTS, 17, 0},
        {"a row deeper than any token", AUTOMATON, row + 4 * 4, 4, top, 0xc8000000u, 0},
        {"a row of depth 0", AUTOMATON, row + 4 * 4, 4, top, 0, 0},
        {"a row owning 17 tiles", AUTOMATON, row + 4 * 6, 4, top, 17u << 24, 0},
        {"a row whose tau is no token", AUTOMATON, row + 4 * 3, 4, top, 0xee000000u, 0},
        {"a row with a spare top byte set", AUTOMATON, row + 4 * 12, 4, top, 1u << 24, 0},
        {"a block key wrong", KEYS, 2 * 17, 2, 0, 0x8003, 0},
        {"a suffix parent no shorter", PARENT, 4ull * token, 4, 0, token, 0},
        {"a suffix parent past the ranks", PARENT, 4ull * token, 4, 0, 0x7fffffffu, 0},
        {"a block start past the nodes", START, 4ull * token, 4, 0, 0x7fffffffu, 0},
        {"a node's entries before it", NODES, 12, 2, 0, 0, 0},
        {"a node's entries past its block", NODES, 14, 2, 0, 0x7fff, 0},
        {"an id below the one before", token > 0 ? IDS : ABSENT, 4ull * token, 4, 0, 0, 0},
        {"an id of 2^32 - 1", IDS, 4ull * token, 4, 0, 0xffffffffu, 0},
    };
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        check_crafted_image(image, size, section, sections, AUTOMATON + 5, &edits[i]);
    }
    /* A row's watched byte (word 11) flipped: set without a watched token, or not matching
     * whether its tau has a watched suffix. */
    if (sections > AUTOMATON + 1) {
        uint64_t word = read_uint(image + section[AUTOMATON] + row + 4 * 11, 4);
        image_edit flip = {"a row's watched byte flipped", AUTOMATON, row + 4 * 11, 4, 1u << 24,
                           word ^ (1u << 24), 1};
        check_crafted_image(image, size, section, sections, AUTOMATON + 5, &flip);
    }
    /* The header's hash mask made 2^60 - 1: its size wraps around unless bounded first.
     * The mask is the header word equal to the hash table's slots minus one. */
    uint64_t slots = (section[HASH + 1] - section[HASH]) / 16;
    for (uint64_t at = 8; at + 8 <= 128; at += 8) {
        if (read_uint(image + at, 8) == slots - 1) {
            image_edit edit = {"a hash of 2^60 slots", 0, at, 8, 0, (1ull << 60) - 1, 0};
            uint64_t header[1] = {0};
            check_crafted_image(image, size, header, 1, 1, &edit);
        }
    }
}

/* The image (and its pieces) of `vocab`, read back: same tables, same ids on `text`. */
static void check_images(const char *name, const tki_vocab *vocab, const uint8_t *text,
                         size_t len) {
    case_begin("%s: image", name);
    uint64_t size = 0, header_size = 0;
    CHECK_STATUS(tki_vocab_image_size(vocab, &size), TKI_OK, "image size");
    CHECK_STATUS(tki_vocab_image_header(vocab, NULL, 0, &header_size), TKI_OK, "header size");
    uint8_t *image = aligned_alloc(64, (size_t)(size + 63) / 64 * 64);
    uint8_t *pieces = aligned_alloc(64, (size_t)(size + 63) / 64 * 64);
    if (image == NULL || pieces == NULL) {
        fprintf(stderr, "test_core: out of memory\n");
        exit(2);
    }
    CHECK_STATUS(tki_vocab_write_image(vocab, image, size - 1), TKI_ERR_ARGUMENT, "too small");
    CHECK_STATUS(tki_vocab_write_image(vocab, image, size), TKI_OK, "write image");
    /* The pieces, laid end to end, are the image. */
    uint64_t at = 0;
    CHECK_STATUS(tki_vocab_image_header(vocab, pieces, header_size - 1, &at), TKI_ERR_ARGUMENT,
                 "header buffer too small");
    CHECK_STATUS(tki_vocab_image_header(vocab, pieces, size, &at), TKI_OK, "header");
    const uint8_t *data = NULL;
    uint64_t piece_size = 0, padding = 0;
    uint32_t count = 0;
    uint64_t section[16];
    for (; tki_vocab_image_piece(vocab, count, &data, &piece_size, &padding) == TKI_OK; count++) {
        section[count < 16 ? count : 15] = at;
        CHECK(at + piece_size + padding <= size && (piece_size + padding) % 64 == 0,
              "piece %u: %llu + %llu bytes at %llu", count, (unsigned long long)piece_size,
              (unsigned long long)padding, (unsigned long long)at);
        if (at + piece_size + padding > size) {
            break;
        }
        memcpy(pieces + at, data, (size_t)piece_size);
        memset(pieces + at + piece_size, 0, (size_t)padding);
        at += piece_size + padding;
    }
    CHECK(at == size && memcmp(pieces, image, (size_t)size) == 0,
          "the %u pieces (%llu bytes) are not the image", count, (unsigned long long)at);
    /* Read back: the same ids. */
    uint32_t *want = checked_malloc((len + 1) * sizeof(uint32_t));
    uint32_t *got = checked_malloc((len + 1) * sizeof(uint32_t));
    size_t want_count = 0, got_count = 0;
    CHECK_STATUS(tki_encode_text(vocab, TKI_PATTERN_CL100K, text, len, 0, want, len, &want_count,
                                 NULL),
                 TKI_OK, "encode with the built tables");
    tki_vocab *read = NULL;
    CHECK_STATUS(tki_vocab_read_image(image, size, &read), TKI_OK, "read image");
    if (read != NULL) {
        CHECK_STATUS(tki_encode_text(read, TKI_PATTERN_CL100K, text, len, 0, got, len,
                                     &got_count, NULL),
                     TKI_OK, "encode with the image");
        CHECK_SAME_IDS(got, got_count, want, want_count, "image");
        /* The image holds no special tokens: given the vocabulary's, it is the same. */
        tki_vocab_info built_info, read_info;
        tki_vocab_get_info(vocab, &built_info);
        tki_vocab_get_info(read, &read_info);
        CHECK(read_info.special_count == 0, "an image with special tokens");
        uint8_t *special_bytes = checked_malloc(4096);
        uint64_t special_offsets[17] = {0};
        uint32_t special_ids[16], specials = 0;
        for (uint32_t id = 0; id <= built_info.max_rank && specials < 16; id++) {
            const uint8_t *bytes = NULL;
            size_t bytes_len = 0;
            uint32_t found = TKI_NONE;
            if (tki_token_bytes(vocab, id, &bytes, &bytes_len) == TKI_OK &&
                (tki_token_rank(vocab, bytes, bytes_len, &found) != TKI_OK || found != id) &&
                special_offsets[specials] + bytes_len <= 4096) {
                memcpy(special_bytes + special_offsets[specials], bytes, bytes_len);
                special_offsets[specials + 1] = special_offsets[specials] + bytes_len;
                special_ids[specials++] = id;
            }
        }
        CHECK(specials == built_info.special_count, "%u special tokens found, want %u", specials,
              built_info.special_count);
        CHECK_STATUS(tki_vocab_set_specials(read, special_bytes, special_offsets, special_ids,
                                            specials, NULL),
                     TKI_OK, "set the special tokens");
        if (specials > 0) {
            CHECK_STATUS(tki_vocab_set_specials(read, special_bytes, special_offsets, special_ids,
                                                specials, NULL),
                         TKI_ERR_ARGUMENT, "set the special tokens twice");
        }
        tki_vocab_get_info(read, &read_info);
        CHECK(memcmp(&built_info, &read_info, sizeof(built_info)) == 0, "info differs");
        free(special_bytes);
        tki_vocab_free(read);
    }
    /* A flipped byte anywhere, a cut, a misaligned copy: refused. */
    for (uint64_t where = 0; where < size; where += size / 7 + 1) {
        image[where] ^= 0x40;
        read = (tki_vocab *)&g_rng;
        CHECK_STATUS(tki_vocab_read_image(image, size, &read), TKI_ERR_ARGUMENT, "flipped byte");
        CHECK(read == NULL, "*out_vocab not NULL after a failure");
        image[where] ^= 0x40;
    }
    CHECK_STATUS(tki_vocab_read_image(image, size - 64, &read), TKI_ERR_ARGUMENT, "cut image");
    CHECK_STATUS(tki_vocab_read_image(image, 16, &read), TKI_ERR_ARGUMENT, "a header's worth");
    memmove(pieces + 8, image, (size_t)size - 8);
    CHECK_STATUS(tki_vocab_read_image(pieces + 8, size - 8, &read), TKI_ERR_ARGUMENT,
                 "misaligned");
    CHECK_STATUS(tki_vocab_read_image(image, size, NULL), TKI_ERR_ARGUMENT, "NULL out_vocab");
    /* Crafted tables whose checksum matches: refused all the same.  The tables are
     * by rank: the id itself, or with sparse ids its place among the tokens' ids. */
    tki_vocab_info info;
    tki_vocab_get_info(vocab, &info);
    size_t listed = (size_t)info.token_count + info.special_count, listed_count = 0;
    uint32_t *listed_ids = checked_malloc((listed + 1) * sizeof(uint32_t));
    uint32_t *listed_lengths = checked_malloc((listed + 1) * sizeof(uint32_t));
    CHECK_STATUS(tki_vocab_list_ids(vocab, listed_ids, listed_lengths, listed, &listed_count), TKI_OK,
                 "list ids");
    CHECK(listed_count == listed, "%zu ids listed, want %zu", listed_count, listed);
    uint32_t token = TKI_NONE;
    for (uint32_t k = 0; k < info.token_count && k < listed_count && k < 1000 && token == TKI_NONE; k++) {
        uint32_t id = listed_ids[k];
        const uint8_t *bytes = NULL;
        size_t token_len = 0;
        uint32_t found = TKI_NONE;
        if (tki_token_bytes(vocab, id, &bytes, &token_len) == TKI_OK && token_len >= 2 &&
            token_len == listed_lengths[k] && tki_token_rank(vocab, bytes, token_len, &found) == TKI_OK &&
            found == id) {
            size_t ids = 0;
            uint32_t out[64];
            if (tki_encode_pieces(vocab, bytes, token_len, &token_len, 1, 0, out, 64, &ids) ==
                    TKI_OK &&
                ids == 1 && out[0] == id) {
                token = info.sparse_ids ? k : id; /* its own BPE: canonical */
            }
        }
    }
    free(listed_ids);
    free(listed_lengths);
    CHECK(token != TKI_NONE, "no canonical token of two bytes or more among the first ranks");
    if (token != TKI_NONE) {
        uint64_t section_end[17];
        memcpy(section_end, section, sizeof(uint64_t) * (count < 16 ? count : 16));
        section_end[count < 16 ? count : 16] = size;
        check_crafted_images(image, size, section_end, count, token, (int)info.sparse_ids);
    }
    read = NULL;
    CHECK_STATUS(tki_vocab_read_image(image, size, &read), TKI_OK, "read image after the edits");
    tki_vocab_free(read);
#if defined(__linux__)
    /* A read-only mapping of the image in a file, checked page-releasing. */
    FILE *file = tmpfile();
    CHECK(file != NULL && fwrite(image, 1, (size_t)size, file) == size && fflush(file) == 0,
          "cannot write the image to a temporary file");
    void *mapping = file == NULL ? MAP_FAILED
                                 : mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fileno(file), 0);
    CHECK(mapping != MAP_FAILED, "cannot map the image");
    if (mapping != MAP_FAILED) {
        read = NULL;
        CHECK_STATUS(tki_vocab_read_mapped_image(mapping, size, &read), TKI_OK,
                     "read mapped image");
        if (read != NULL) {
            CHECK_STATUS(tki_encode_text(read, TKI_PATTERN_CL100K, text, len, 0, got, len,
                                         &got_count, NULL),
                         TKI_OK, "encode with the mapped image");
            CHECK_SAME_IDS(got, got_count, want, want_count, "mapped image");
            tki_vocab_free(read);
        }
        /* Its pages were dropped, not lost: a second check still passes. */
        CHECK_STATUS(tki_vocab_read_mapped_image(mapping, size, &read), TKI_OK,
                     "read mapped image again");
        tki_vocab_free(read);
        munmap(mapping, (size_t)size);
    }
    if (file != NULL) {
        fclose(file);
    }
#endif
    free(want);
    free(got);
    free(image);
    free(pieces);
    case_end();
}

/* The special tokens of a vocabulary without them (one read from an image). */
static void check_set_specials(void) {
    token_list *list = checked_calloc(1, sizeof(token_list));
    tki_vocab *vocab = NULL;
    uint32_t error_index = 0;
    list_init(list, -1);
    list_add(list, "ab", 2, 300); /* ranks 256..299 are free: holes */
    case_begin("special tokens set after the build");
    CHECK_STATUS(list_build(list, &vocab, &error_index), TKI_OK, "build");
    if (vocab != NULL) {
        static const uint8_t bytes[] = "<|a|><|bb|><|c|>";
        const uint64_t offsets[4] = {0, 5, 11, 16};
        const uint32_t in_a_hole[3] = {280, 500, 270}, twice[3] = {280, 500, 280},
                       on_a_token[3] = {280, 300, 270}, none[3] = {280, TKI_NONE, 270};
        uint32_t index = 0;
        CHECK_STATUS(tki_vocab_set_specials(vocab, bytes, offsets, twice, 3, &index),
                     TKI_ERR_DUPLICATE_RANK, "an id twice");
        CHECK(index == 2, "error_index %u, want 2 (the later of the two)", index);
        CHECK_STATUS(tki_vocab_set_specials(vocab, bytes, offsets, on_a_token, 3, &index),
                     TKI_ERR_DUPLICATE_RANK, "a mergeable token's id");
        CHECK(index == 1, "error_index %u, want 1", index);
        CHECK_STATUS(tki_vocab_set_specials(vocab, bytes, offsets, none, 3, &index),
                     TKI_ERR_ARGUMENT, "TKI_NONE");
        const uint8_t *got = NULL;
        size_t got_len = 0;
        CHECK_STATUS(tki_token_bytes(vocab, 280, &got, &got_len), TKI_ERR_UNKNOWN_TOKEN,
                     "no special token after a failure");
        CHECK_STATUS(tki_vocab_set_specials(vocab, bytes, offsets, in_a_hole, 3, &index), TKI_OK,
                     "ids in a hole and past the ranks");
        const uint32_t ids[4] = {270, 300, 500, 280};
        uint8_t out[64];
        size_t out_len = 0, bad = 0;
        CHECK_STATUS(tki_decode(vocab, ids, 4, out, sizeof(out), &out_len, &bad), TKI_OK, "decode");
        CHECK(out_len == 18 && memcmp(out, "<|c|>ab<|bb|><|a|>", 18) == 0, "decoded %zu bytes",
              out_len);
        tki_vocab_info info;
        tki_vocab_get_info(vocab, &info);
        CHECK(info.special_count == 3 && info.max_rank == 500, "info: %u specials, max rank %u",
              info.special_count, info.max_rank);
        tki_vocab_free(vocab);
    }
    case_end();
    free(list);
}

/* Images of small vocabularies: proper, properized, and with watched tokens. */
static void run_small_image_tests(void) {
    check_set_specials();
    token_list *list = checked_calloc(1, sizeof(token_list));
    static const uint8_t text[] = "abab baba abba  bb aaab\n\nab's ababab abc bcbc";
    tki_vocab *vocab = NULL;
    uint32_t error_index = 0;
    list_init(list, -1);
    list_add(list, "ab", 2, 300);
    list_add(list, "abab", 4, 301);
    list_add(list, "ba", 2, 302);
    if (list_build(list, &vocab, &error_index) == TKI_OK) {
        check_images("a proper vocabulary", vocab, text, sizeof(text) - 1);
        tki_vocab_free(vocab);
    }
    list_init(list, -1);
    list_add(list, "ab", 2, 301);
    list_add(list, "bc", 2, 300);
    list_add(list, "abc", 3, 299);
    if (list_build(list, &vocab, &error_index) == TKI_OK) {
        tki_vocab_info info;
        tki_vocab_get_info(vocab, &info);
        case_begin("an improper vocabulary: properized");
        CHECK(info.incremental && info.moved_rules == 1 && info.watched_tokens == 0,
              "incremental %u, moved %u, watched %u", info.incremental, info.moved_rules,
              info.watched_tokens);
        case_end();
        check_images("an improper vocabulary", vocab, text, sizeof(text) - 1);
        tki_vocab_free(vocab);
    }
    /* Sparse ranks: the image holds the ids of the renumbered ranks. */
    list_init(list, -1);
    list_add(list, "ab", 2, 1000000000u);
    list_add(list, "abab", 4, 3000000000u);
    list_add(list, "ba", 2, UINT32_MAX - 1);
    if (list_build(list, &vocab, &error_index) == TKI_OK) {
        tki_vocab_info info;
        tki_vocab_get_info(vocab, &info);
        case_begin("a sparse vocabulary: renumbered");
        CHECK(info.sparse_ids && info.incremental && info.max_rank == UINT32_MAX - 1, "sparse_ids %u, max_rank %u",
              info.sparse_ids, info.max_rank);
        case_end();
        check_images("a sparse vocabulary", vocab, text, sizeof(text) - 1);
        tki_vocab_free(vocab);
    }
    list_init(list, -1);
    list_add(list, "aaa", 3, 300); /* a, aa, aaa with aaa before aa: "aaaa" is aaa|a, which */
    list_add(list, "aa", 2, 301);  /* no priorities give: aaa is watched */
    if (list_build(list, &vocab, &error_index) == TKI_OK) {
        tki_vocab_info info;
        tki_vocab_get_info(vocab, &info);
        case_begin("a vocabulary that cannot be properized: watched");
        CHECK(info.incremental && info.moved_rules == 1 && info.watched_tokens == 1,
              "incremental %u, moved %u, watched %u", info.incremental, info.moved_rules,
              info.watched_tokens);
        case_end();
        static const uint8_t runs[] = "aaaa aaa aa a aaaaaaa baaaab";
        check_images("a watched vocabulary", vocab, runs, sizeof(runs) - 1);
        tki_vocab_free(vocab);
    }
    free(list);
}

/* The bundled file read by the core equals the same file read by rank_file.h. */
static void check_rank_file_build(const big_vocab *big) {
    case_begin("%s: built from the rank file", big->name);
    uint8_t *text = NULL;
    size_t len = 0;
    CHECK(tki_read_file(big->path, &text, &len) == 0, "cannot read %s", big->path);
    tki_vocab *direct = NULL, *from_arrays = NULL;
    tki_rank_file_error error;
    uint32_t error_index = 0;
    CHECK_STATUS(tki_vocab_build_from_rank_file(text, len, NULL, NULL, NULL, 0, &direct, &error,
                                                &error_index),
                 TKI_OK, "tki_vocab_build_from_rank_file");
    CHECK_STATUS(tki_vocab_build(big->file.bytes, big->file.offsets, big->file.ranks,
                                 big->file.count, NULL, NULL, NULL, 0, &from_arrays, &error_index),
                 TKI_OK, "tki_vocab_build");
    if (direct != NULL && from_arrays != NULL) {
        uint64_t size_direct = 0, size_arrays = 0;
        tki_vocab_image_size(direct, &size_direct);
        tki_vocab_image_size(from_arrays, &size_arrays);
        CHECK(size_direct == size_arrays, "image sizes %llu and %llu",
              (unsigned long long)size_direct, (unsigned long long)size_arrays);
        if (size_direct == size_arrays) {
            uint8_t *image_direct = checked_malloc((size_t)size_direct);
            uint8_t *image_arrays = checked_malloc((size_t)size_arrays);
            CHECK_STATUS(tki_vocab_write_image(direct, image_direct, size_direct), TKI_OK, "image");
            CHECK_STATUS(tki_vocab_write_image(from_arrays, image_arrays, size_arrays), TKI_OK,
                         "image");
            CHECK(memcmp(image_direct, image_arrays, (size_t)size_direct) == 0,
                  "the tables differ");
            free(image_direct);
            free(image_arrays);
        }
    }
    tki_rank_list list;
    CHECK_STATUS(tki_rank_file_parse(text, len, &list, &error), TKI_OK, "tki_rank_file_parse");
    CHECK(list.count == big->file.count &&
              memcmp(list.ranks, big->file.ranks, list.count * sizeof(uint32_t)) == 0 &&
              memcmp(list.offsets, big->file.offsets, (list.count + 1) * sizeof(uint64_t)) == 0 &&
              memcmp(list.bytes, big->file.bytes, (size_t)list.offsets[list.count]) == 0,
          "parsed tokens differ");
    tki_rank_list_free(&list);
    tki_vocab_free(direct);
    tki_vocab_free(from_arrays);
    free(text);
    case_end();
}

/* ------------------------------------------------------------------ allocation failures */

#ifdef TKI_TEST_ALLOC_FAILURES
#include "alloc_failures.h"

enum { MAX_FAILURE_POINTS = 5000 };

static void alloc_failures_for(const char *name, const uint8_t *bytes, const uint64_t *offsets,
                               const uint32_t *ranks, uint32_t count, const uint8_t *text,
                               size_t len) {
    case_begin("allocation failures: %s", name);
    /* The build. */
    tki_vocab *vocab = NULL;
    int64_t n = 0;
    for (; n < MAX_FAILURE_POINTS; n++) {
        tki_vocab *attempt = (tki_vocab *)&g_rng;
        uint32_t error_index = 0;
        arm_failure(n);
        int32_t status = tki_vocab_build(bytes, offsets, ranks, count, NULL, NULL, NULL, 0,
                                         &attempt, &error_index);
        int failed = disarm_failure();
        if (!failed) {
            CHECK_STATUS(status, TKI_OK, "build with no failed allocation");
            vocab = status == TKI_OK ? attempt : NULL;
            break;
        }
        if (status == TKI_OK) {
            tki_vocab_free(attempt); /* survived the failure: allowed */
            continue;
        }
        CHECK(status == TKI_ERR_NOMEM, "build, allocation %lld fails: status %d (%s)",
              (long long)n, (int)status, tki_status_message(status));
        CHECK(attempt == NULL, "build, allocation %lld fails: *out_vocab not NULL", (long long)n);
    }
    fprintf(stdout, "allocation failures: %s: build makes %lld allocations\n", name,
            (long long)n);
    if (vocab == NULL) {
        case_end();
        return;
    }
    tki_vocab_info info;
    tki_vocab_get_info(vocab, &info);
    /* The encoders, against their own answer with no failure; last the prefix pass
     * over the text repeated past 4 KiB, where it allocates a memo too. */
    size_t long_len = 0;
    uint8_t *long_text = checked_malloc((4096 / len + 2) * len);
    while (long_len <= 4096) {
        memcpy(long_text + long_len, text, len);
        long_len += len;
    }
    uint32_t *want = checked_malloc(long_len * sizeof(uint32_t));
    uint32_t *got = checked_malloc(long_len * sizeof(uint32_t));
    size_t *ends = checked_malloc(len * sizeof(size_t));
    size_t want_count = 0, got_count = 0, pieces = 0;
    static const uint32_t methods[3] = {0, TKI_METHOD_LINEAR, TKI_METHOD_HEAP};
    for (int call = 0; call < 6; call++) {
        if (call >= 4 && !info.incremental) {
            break;
        }
        int32_t status = TKI_OK;
        for (n = -1; n < MAX_FAILURE_POINTS; n++) {
            arm_failure(n);
            size_t end = len;
            if (call < 3) {
                status = tki_encode_pieces(vocab, text, len, &end, 1, methods[call], got, len,
                                           &got_count);
            } else if (call == 3) {
                status = tki_encode_text(vocab, TKI_PATTERN_CL100K, text, len, 0, got, len,
                                         &got_count, NULL);
            } else if (call == 4) {
                status = tki_prefix_last_tokens(vocab, text, len, 0, got);
                got_count = len;
            } else {
                status = tki_prefix_pass(vocab, TKI_PATTERN_CL100K, long_text, long_len, 0, got);
                got_count = long_len;
            }
            int failed = disarm_failure();
            if (n < 0) {
                CHECK_STATUS(status, TKI_OK, "reference call");
                memcpy(want, got, got_count * sizeof(uint32_t));
                want_count = got_count;
                continue;
            }
            if (!failed) {
                break;
            }
            if (status == TKI_OK) {
                CHECK_SAME_IDS(got, got_count, want, want_count, "survived a failed allocation");
            } else {
                CHECK(status == TKI_ERR_NOMEM, "call %d, allocation %lld fails: status %d", call,
                      (long long)n, (int)status);
            }
        }
    }
    arm_failure(0);
    int32_t status = tki_pretokenize(TKI_PATTERN_O200K, text, len, ends, len, &pieces);
    CHECK(!disarm_failure() && status == TKI_OK, "pretokenize allocates");
    free(want);
    free(got);
    free(ends);
    free(long_text);
    tki_vocab_free(vocab);
    case_end();
}

/* The rank-file reader and the image reader: every failed allocation is TKI_ERR_NOMEM. */
static void alloc_failures_in_readers(void) {
    case_begin("allocation failures: rank files and images");
    char *text = checked_malloc(1 << 16);
    size_t len = base_rank_file(text, 1 << 16, "YWJhYg== 300", 260); /* "abab" */
    int64_t n = 0;
    for (int call = 0; call < 2; call++) {
        for (n = 0; n < MAX_FAILURE_POINTS; n++) {
            tki_rank_list list;
            tki_vocab *vocab = (tki_vocab *)&g_rng;
            arm_failure(n);
            int32_t status = call == 0 ? tki_rank_file_parse((const uint8_t *)text, len, &list, NULL)
                                       : tki_vocab_build_from_rank_file((const uint8_t *)text, len,
                                                                        NULL, NULL, NULL, 0,
                                                                        &vocab, NULL, NULL);
            int failed = disarm_failure();
            if (status == TKI_OK) {
                if (call == 0) {
                    tki_rank_list_free(&list);
                } else {
                    tki_vocab_free(vocab);
                }
            }
            if (!failed) {
                CHECK_STATUS(status, TKI_OK, call == 0 ? "parse" : "build from the file");
                break;
            }
            CHECK(status == TKI_OK || status == TKI_ERR_NOMEM,
                  "%s, allocation %lld fails: status %d", call == 0 ? "parse" : "build",
                  (long long)n, (int)status);
            if (call == 1 && status != TKI_OK) {
                CHECK(vocab == NULL, "build, allocation %lld fails: *out_vocab not NULL",
                      (long long)n);
            }
        }
    }
    /* A duplicate found by the table makes the reader look for the file's first one. */
    len = base_rank_file(text, 1 << 16, "YWI= 300", 260);
    for (n = 0; n < MAX_FAILURE_POINTS; n++) {
        tki_vocab *vocab = NULL;
        arm_failure(n);
        int32_t status = tki_vocab_build_from_rank_file((const uint8_t *)text, len, NULL, NULL,
                                                        NULL, 0, &vocab, NULL, NULL);
        int failed = disarm_failure();
        CHECK(status == TKI_ERR_DUPLICATE_BYTES || (failed && status == TKI_ERR_NOMEM),
              "duplicate, allocation %lld fails: status %d", (long long)n, (int)status);
        if (!failed) {
            break;
        }
    }
    /* Reading an image allocates the vocabulary. */
    len = base_rank_file(text, 1 << 16, NULL, 0);
    tki_vocab *built = NULL;
    if (tki_vocab_build_from_rank_file((const uint8_t *)text, len, NULL, NULL, NULL, 0, &built,
                                       NULL, NULL) == TKI_OK) {
        uint64_t size = 0;
        tki_vocab_image_size(built, &size);
        uint8_t *image = aligned_alloc(64, (size_t)(size + 63) / 64 * 64);
        if (image != NULL && tki_vocab_write_image(built, image, size) == TKI_OK) {
            for (n = 0; n < MAX_FAILURE_POINTS; n++) {
                tki_vocab *read = (tki_vocab *)&g_rng;
                arm_failure(n);
                int32_t status = tki_vocab_read_image(image, size, &read);
                int failed = disarm_failure();
                if (status == TKI_OK) {
                    tki_vocab_free(read);
                }
                if (!failed) {
                    CHECK_STATUS(status, TKI_OK, "read image");
                    break;
                }
                CHECK(status == TKI_ERR_NOMEM && read == NULL,
                      "read image, allocation %lld fails: status %d", (long long)n, (int)status);
            }
        }
        free(image);
        tki_vocab_free(built);
    }
    free(text);
    case_end();
}

static void run_alloc_failure_tests(void) {
    /* A proper vocabulary (incremental), an improper one (heap only), and r50k's first tokens. */
    token_list *list = checked_calloc(1, sizeof(token_list));
    static const uint8_t text[] =
        "abab baba abba  bb aaab\n\nab's ababab \xe4\xb8\xad\xe6\x96\x87 abababababab!!";
    list_init(list, -1);
    list_add(list, "ab", 2, 300);
    list_add(list, "abab", 4, 301);
    list_add(list, "ba", 2, 302);
    list_add(list, "bab", 3, 303);
    list_add(list, " ab", 3, 304);
    alloc_failures_for("a proper vocabulary", list->bytes, list->offsets, list->ranks, list->count,
                       text, sizeof(text) - 1);
    list_init(list, -1);
    list_add(list, "ab", 2, 301);
    list_add(list, "bc", 2, 300);
    list_add(list, "abc", 3, 299);
    alloc_failures_for("an improper vocabulary", list->bytes, list->offsets, list->ranks,
                       list->count, text, sizeof(text) - 1);
    list_init(list, -1);
    list_add(list, "ab", 2, 1000000000u);
    list_add(list, "abab", 4, 2000000000u);
    list_add(list, "ba", 2, 3000000000u);
    alloc_failures_for("a sparse vocabulary", list->bytes, list->offsets, list->ranks, list->count,
                       text, sizeof(text) - 1);
    free(list);
    alloc_failures_in_readers();
}
#endif

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv) {
    uint64_t seed = 20240611u;
    int quick = 0, with_crash_cases = 1, alloc_failures_only = 0;
    const char *rank_paths[16];
    const char *text_paths[64];
    int rank_count = 0, text_count = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--crash-cases") == 0) {
            with_crash_cases = 1;
        } else if (strcmp(argv[i], "--alloc-failures-only") == 0) {
            alloc_failures_only = 1;
        } else if (strcmp(argv[i], "--text") == 0 && i + 1 < argc && text_count < 64) {
            text_paths[text_count++] = argv[++i];
        } else if (argv[i][0] != '-' && rank_count < 16) {
            rank_paths[rank_count++] = argv[i];
        } else {
            fprintf(stderr,
                    "usage: %s [--seed N] [--quick] [--text FILE]... [--crash-cases] "
                    "[--alloc-failures-only] [RANK_FILE ...]\n",
                    argv[0]);
            return 2;
        }
    }
    if (rank_count == 0) {
        rank_paths[rank_count++] = "tiktoken_inc/ranks/r50k_base.tiktoken";
        rank_paths[rank_count++] = "tiktoken_inc/ranks/cl100k_base.tiktoken";
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress and failures reach a log at once */
    g_rng = seed;
    fprintf(stdout, "test_core: seed %llu%s\n", (unsigned long long)seed, quick ? " (quick)" : "");
    clock_t start = clock();
#ifdef TKI_TEST_ALLOC_FAILURES
    run_alloc_failure_tests();
    fprintf(stdout, "allocation failures done (%.1f s)\n",
            (double)(clock() - start) / CLOCKS_PER_SEC);
#else
    if (alloc_failures_only) {
        fprintf(stderr, "test_core: built without TKI_TEST_ALLOC_FAILURES\n");
        return 2;
    }
#endif
    if (alloc_failures_only) {
        rank_count = 0;
    } else {
        run_error_tests();
        run_utf8_prefix_tests(quick);
        run_rank_file_tests();
        run_small_image_tests();
        run_long_token_tests();
        run_hash_collision_tests();
        run_piece_memo_tests();
        run_long_chain_tests(quick);
        fprintf(stdout, "error paths and long tokens done (%.1f s)\n",
                (double)(clock() - start) / CLOCKS_PER_SEC);
        run_small_vocab_tests(quick);
        fprintf(stdout, "small vocabularies done (%.1f s)\n",
                (double)(clock() - start) / CLOCKS_PER_SEC);
        run_trained_vocab_tests(quick);
        fprintf(stdout, "trained vocabularies done (%.1f s)\n",
                (double)(clock() - start) / CLOCKS_PER_SEC);
    }
    for (int r = 0; r < rank_count; r++) {
        big_vocab big;
        if (big_vocab_load(&big, rank_paths[r]) != 0) {
            case_begin("load %s", rank_paths[r]);
            CHECK(0, "cannot load or build %s", rank_paths[r]);
            case_end();
            big_vocab_free(&big);
            continue;
        }
        run_big_tests(&big, quick);
        check_rank_file_build(&big);
        {
            static const char text[] = "Hello, world! 12345 don't  \n\n\xe4\xb8\xad\xe6\x96\x87 abc";
            check_images(big.name, big.vocab, (const uint8_t *)text, sizeof(text) - 1);
        }
        for (int t = 0; t < text_count; t++) {
            run_text_file(&big, text_paths[t]);
        }
        big_vocab_free(&big);
        fprintf(stdout, "%s done (%.1f s)\n", big.name, (double)(clock() - start) / CLOCKS_PER_SEC);
    }
    if (with_crash_cases) {
        crash_cases();
    }
    fprintf(stdout, "%llu passed, %llu failed\n", (unsigned long long)g_passed,
            (unsigned long long)g_failed);
    return g_failed == 0 ? 0 : 1;
}
