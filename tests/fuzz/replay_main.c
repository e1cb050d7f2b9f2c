/*
 * replay_main.c — owns the stand-alone driver that runs a fuzz target
 * without libFuzzer: it calls LLVMFuzzerInitialize once, then
 * LLVMFuzzerTestOneInput on each file named on the command line (the
 * regression inputs in tests/fuzz/regressions/<target>/), so that any C
 * compiler with sanitizers can replay them.  Prints "replayed N inputs".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_common.h"

int main(int argc, char **argv) {
    int init_argc = argc;
    char **init_argv = argv;
    LLVMFuzzerInitialize(&init_argc, &init_argv);
    int replayed = 0;
    for (int i = 1; i < argc; i++) {
        uint8_t *data = NULL;
        size_t len = 0;
        if (tki_read_file(argv[i], &data, &len) != 0) {
            fprintf(stderr, "replay: cannot read %s\n", argv[i]);
            return 2;
        }
        uint8_t *exact = fuzz_copy(data, len); /* exact size, for the sanitizers */
        free(data);
        fprintf(stderr, "replay: %s (%zu bytes)\n", argv[i], len);
        LLVMFuzzerTestOneInput(exact, len);
        free(exact);
        replayed++;
    }
    printf("replayed %d inputs\n", replayed);
    return 0;
}
