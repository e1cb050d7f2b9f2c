/*
 * table_memory.c — memory for the big tables of a build (the automaton's rows
 * and tiles, the centroid blocks, the hash): tens of megabytes, all written
 * once, at once.
 *
 * With 4 KiB pages, faulting them in costs a build about as much as some of
 * its passes (o200k_base: ~20,000 page faults, ~30 ms).  On Linux the part of
 * each block that covers whole 2 MiB huge pages is marked MADV_HUGEPAGE, so
 * that with transparent huge pages in "madvise" mode it is faulted in 2 MiB
 * at a time (tki_advise_huge_pages, which the Python binding also uses for
 * its large id buffers).  Only a hint: the memory is aligned_alloc's, freed
 * with free, and behaves the same when the kernel declines.  Blocks start on a cache
 * line, so that a 64-byte row of the automaton is one line, not two.
 */
#define _DEFAULT_SOURCE /* madvise and MADV_HUGEPAGE under -std=c11 */

#include <stdint.h>
#include <stdlib.h>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "internal.h"

#define HUGE_PAGE_BYTES ((uintptr_t)2 << 20)
#define CACHE_LINE_BYTES ((size_t)64)

void tki_advise_huge_pages(void *memory, size_t size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (memory == NULL) {
        return;
    }
    uintptr_t first = ((uintptr_t)memory + HUGE_PAGE_BYTES - 1) & ~(HUGE_PAGE_BYTES - 1);
    uintptr_t end = ((uintptr_t)memory + size) & ~(HUGE_PAGE_BYTES - 1);
    if (end > first) {
        (void)madvise((void *)first, (size_t)(end - first), MADV_HUGEPAGE);
    }
#else
    (void)memory;
    (void)size;
#endif
}

void *tki_table_alloc(size_t size) {
    if (size > SIZE_MAX - CACHE_LINE_BYTES) {
        return NULL;
    }
    /* aligned_alloc wants a multiple of the alignment (and some libraries a non-zero one). */
    size_t rounded = size == 0 ? CACHE_LINE_BYTES : (size + CACHE_LINE_BYTES - 1) / CACHE_LINE_BYTES * CACHE_LINE_BYTES;
    void *memory = aligned_alloc(CACHE_LINE_BYTES, rounded);
    if (size >= 2 * HUGE_PAGE_BYTES) {
        tki_advise_huge_pages(memory, size);
    }
    return memory;
}
