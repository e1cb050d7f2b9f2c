#!/usr/bin/env bash
# .ci/sanitize_python.sh — owns the sanitizer run of the Python tests: builds the
# extension with AddressSanitizer and UndefinedBehaviorSanitizer (gcc) into a fresh
# virtualenv and runs a slice of the test suite with libasan preloaded, so every C call
# the tests make (build, encode, stream, pre-tokenize, decode, images, and the calls of
# tiktoken_inc/_tki_python.c that take Python objects, the batches' threads included) is
# checked.
# Leak checking is off (the interpreter itself leaks by design at exit).  Run from
# anywhere; exits non-zero on any failure or sanitizer report.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=.ci/sources.sh
source .ci/sources.sh
venv="$(mktemp -d)"
trap 'rm -rf "$venv"' EXIT

python3 -m venv "$venv/venv"
# shellcheck disable=SC1091
source "$venv/venv/bin/activate"
# Built from a copy of the sources: setuptools builds in the tree and reuses object files
# in build/, so an instrumented build there would leak into the next ordinary install.
copy_sources "$venv/src"
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1"
TKI_EXTRA_CFLAGS="$flags" TKI_EXTRA_LDFLAGS="-fsanitize=address,undefined" \
    pip install -q "$venv/src[test]"

libasan="$(gcc -print-file-name=libasan.so)"
libubsan="$(gcc -print-file-name=libubsan.so)"
cache="$(mktemp -d)"
(
    cd "$venv"  # import the installed (instrumented) package, not the source tree
    LD_PRELOAD="$libasan $libubsan" \
    ASAN_OPTIONS="detect_leaks=0:abort_on_error=1" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
    TIKTOKEN_INC_CACHE_DIR="$cache" \
        python -m pytest -q -p no:cacheprovider --rootdir "$OLDPWD" \
        "$OLDPWD/tests/test_core.py" "$OLDPWD/tests/test_small_vocab.py" \
        "$OLDPWD/tests/test_pretokenize.py" "$OLDPWD/tests/test_cache.py" \
        "$OLDPWD/tests/test_gateway.py" "$OLDPWD/tests/test_lean_calls.py" \
        "$OLDPWD/tests/test_threads.py::test_batch_threads_in_c" \
        "$OLDPWD/tests/test_threads.py::test_batch_stops_on_a_signal" \
        "$OLDPWD/tests/test_flat_batch.py" "$OLDPWD/tests/test_one_shot_scratch.py" \
        "$OLDPWD/tests/test_corpus_cli.py" \
        "$OLDPWD/tests/test_pattern_compiler.py::test_damaged_programs_are_refused_or_split_safely" \
        "$OLDPWD/tests/test_pattern_compiler.py::test_compiled_builtins_equal_hand_written_splitters" \
        -k "$not_timing_tests"
)
rm -rf "$cache"
echo "sanitize_python: done"
