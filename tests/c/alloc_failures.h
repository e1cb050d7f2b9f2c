/*
 * alloc_failures.h — the allocation-failure wrappers shared by the C tests.
 *
 * Built with -DTKI_TEST_ALLOC_FAILURES and the linker's --wrap for malloc,
 * calloc, realloc and aligned_alloc (GNU ld; see .ci/sanitize.sh), every allocation of the
 * program goes through these wrappers, which fail the Nth one while armed.
 * A test repeats a core call with N = 0, 1, 2, ... until it makes no
 * allocation fail: every run must return TKI_ERR_NOMEM (or succeed with the
 * right answer), and leave nothing leaked (LeakSanitizer checks at exit).
 * Include it once, in the test's one translation unit.
 */
#ifndef TIKTOKEN_INC_TEST_ALLOC_FAILURES_H
#define TIKTOKEN_INC_TEST_ALLOC_FAILURES_H

#include <stddef.h>
#include <stdint.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *pointer, size_t size);
void *__real_aligned_alloc(size_t alignment, size_t size);

static int64_t g_fail_countdown = -1; /* fail the allocation that brings it to 0; -1: never */
static uint32_t g_failed_allocations = 0;

static int allocation_fails(void) {
    if (g_fail_countdown < 0) {
        return 0;
    }
    if (g_fail_countdown-- == 0) {
        g_failed_allocations++;
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *pointer, size_t size);
void *__wrap_aligned_alloc(size_t alignment, size_t size);

void *__wrap_malloc(size_t size) {
    return allocation_fails() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t count, size_t size) {
    return allocation_fails() ? NULL : __real_calloc(count, size);
}

void *__wrap_realloc(void *pointer, size_t size) {
    return allocation_fails() ? NULL : __real_realloc(pointer, size);
}

void *__wrap_aligned_alloc(size_t alignment, size_t size) {
    return allocation_fails() ? NULL : __real_aligned_alloc(alignment, size);
}

/* Fails the allocation n allocations from now (n = 0: the next one); n < 0: none. */
static void arm_failure(int64_t n) {
    g_failed_allocations = 0;
    g_fail_countdown = n;
}

/* Disarms; returns whether an allocation failed while armed. */
static int disarm_failure(void) {
    g_fail_countdown = -1;
    return g_failed_allocations > 0;
}

#endif /* TIKTOKEN_INC_TEST_ALLOC_FAILURES_H */
