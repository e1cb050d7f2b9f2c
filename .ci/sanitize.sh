#!/usr/bin/env bash
# .ci/sanitize.sh — owns the sanitizer run of the C core: builds
# tests/c/test_core.c together with csrc/*.c under AddressSanitizer and
# UndefinedBehaviorSanitizer (-fno-sanitize-recover=all -g -O1) and runs it on
# the bundled r50k and cl100k rank files (plus ../shared/corpora/multilingual.txt
# when that file is there), once more built without SIMD (-DTKI_NO_SIMD), once
# more failing each allocation of the core in turn (-DTKI_TEST_ALLOC_FAILURES),
# does the same with
# tests/c/test_special_tokens.c (the special-token matcher), tests/c/test_pattern.c
# (compiled pre-split patterns) and tests/c/test_stream.c (streams, bounded calls,
# truncation), runs tests/c/test_block_limit.c
# (the automaton's size limit, lowered), then replays every input saved under
# tests/fuzz/regressions/<target>/ through the fuzz targets built with a plain
# driver (tests/fuzz/replay_main.c).  Installs a compiler from Debian's
# packages if none with working sanitizers is found.  Run from anywhere;
# exits non-zero on any failure.
#   CC=clang .ci/sanitize.sh     to pick the compiler
#   TKI_TEST_ARGS="--seed 7"     extra arguments for test_core
set -euo pipefail

cd "$(dirname "$0")/.."
root="$PWD"
build="${TKI_SANITIZE_BUILD_DIR:-$root/build/sanitize}"
mkdir -p "$build"

ci_name=sanitize
# shellcheck source=.ci/apt.sh
source "$root/.ci/apt.sh"

sanitize_flags=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1)
warning_flags=(-std=c11 -Wall -Wextra -Werror)

# Does "$1" build and run a program with both sanitizers?
compiler_works() {
    command -v "$1" >/dev/null 2>&1 || return 1
    printf '#include <stdio.h>\nint main(void) { puts("ok"); return 0; }\n' >"$build/probe.c"
    "$1" "${sanitize_flags[@]}" "$build/probe.c" -o "$build/probe" >/dev/null 2>&1 &&
        "$build/probe" >/dev/null 2>&1
}

cc="${CC:-}"
if [ -z "$cc" ]; then
    for candidate in gcc clang cc; do
        if compiler_works "$candidate"; then
            cc="$candidate"
            break
        fi
    done
fi
if [ -z "$cc" ] || ! compiler_works "$cc"; then
    want="${cc:-gcc}"
    echo "sanitize: installing a C compiler with sanitizers ($want)"
    case "$want" in
    clang*)
        apt_install clang
        major="$(clang -dumpversion | cut -d. -f1)"
        compiler_works clang || apt_install "libclang-rt-$major-dev"
        cc=clang
        ;;
    *)
        apt_install gcc libc6-dev
        cc=gcc
        ;;
    esac
    compiler_works "$cc" || { echo "sanitize: $cc cannot build with sanitizers" >&2; exit 1; }
fi
echo "sanitize: compiler $cc ($("$cc" --version | head -n 1))"

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

status=0
start=$SECONDS

# 1. test_core.
"$cc" "${warning_flags[@]}" "${sanitize_flags[@]}" -Icsrc -Itests/c \
    tests/c/test_core.c csrc/*.c -o "$build/test_core"
test_args=(tiktoken_inc/ranks/r50k_base.tiktoken tiktoken_inc/ranks/cl100k_base.tiktoken)
corpus="$root/../shared/corpora/multilingual.txt"
if [ -f "$corpus" ]; then
    test_args+=(--text "$corpus")
fi
# shellcheck disable=SC2206
extra=(${TKI_TEST_ARGS:-})
if "$build/test_core" "${extra[@]}" "${test_args[@]}"; then
    echo "sanitize: test_core passed ($((SECONDS - start)) s)"
else
    echo "sanitize: test_core FAILED" >&2
    status=1
fi

# 1b. test_core built without SIMD: the plain C that other machines compile.
"$cc" "${warning_flags[@]}" "${sanitize_flags[@]}" -DTKI_NO_SIMD -Icsrc -Itests/c \
    tests/c/test_core.c csrc/*.c -o "$build/test_core_no_simd"
if "$build/test_core_no_simd" "${extra[@]}" "${test_args[@]}"; then
    echo "sanitize: test_core without SIMD passed ($((SECONDS - start)) s)"
else
    echo "sanitize: test_core without SIMD FAILED" >&2
    status=1
fi

# 2. test_core again, failing each allocation the core makes in turn (GNU ld's --wrap).
"$cc" "${warning_flags[@]}" "${sanitize_flags[@]}" -DTKI_TEST_ALLOC_FAILURES \
    -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc -Icsrc -Itests/c \
    tests/c/test_core.c csrc/*.c -o "$build/test_core_alloc_failures"
if "$build/test_core_alloc_failures" --alloc-failures-only; then
    echo "sanitize: allocation-failure tests passed"
else
    echo "sanitize: allocation-failure tests FAILED" >&2
    status=1
fi

# 3. test_special_tokens, plain and failing each allocation in turn.
"$cc" "${warning_flags[@]}" "${sanitize_flags[@]}" -Icsrc -Itests/c \
    tests/c/test_special_tokens.c csrc/*.c -o "$build/test_special_tokens"
"$cc" "${warning_flags[@]}" "${sanitize_flags[@]}" -DTKI_TEST_ALLOC_FAILURES \
    -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc -Icsrc -Itests/c \
    tests/c/test_special_tokens.c csrc/*.c -o "$build/test_special_tokens_alloc_failures"
if "$build/test_special_tokens" && "$build/test_special_tokens_alloc_failures" --alloc-failures-only; then
    echo "sanitize: test_special_tokens passed"
else
    echo "sanitize: test_special_tokens FAILED" >&2
    status=1
fi

# 3b. test_stream (streams, bounded calls and truncation against one-shot encoding), plain
#     and failing each allocation in turn.
"$cc" "${warning_flags[@]}" "${sanitize_flags[@]}" -Icsrc -Itests/c \
    tests/c/test_stream.c csrc/*.c -o "$build/test_stream"
"$cc" "${warning_flags[@]}" "${sanitize_flags[@]}" -DTKI_TEST_ALLOC_FAILURES \
    -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc -Icsrc -Itests/c \
    tests/c/test_stream.c csrc/*.c -o "$build/test_stream_alloc_failures"
stream_args=(--quick tiktoken_inc/ranks/cl100k_base.tiktoken)
if [ -f "$corpus" ]; then
    stream_args=(--text "$corpus" "${stream_args[@]}")
fi
python3 tests/fuzz/gen_pattern_programs.py "$build/patterns" # compiled patterns stream too
if TKI_PATTERN_DIR="$build/patterns" "$build/test_stream" "${stream_args[@]}" &&
    "$build/test_stream_alloc_failures" --alloc-failures-only tiktoken_inc/ranks/cl100k_base.tiktoken; then
    echo "sanitize: test_stream passed ($((SECONDS - start)) s)"
else
    echo "sanitize: test_stream FAILED" >&2
    status=1
fi

# 4. test_block_limit: the automaton's size limit lowered to 274 blocks, so that a small
#    vocabulary crosses it and must fall back to the heap BPE, exactly.
"$cc" "${warning_flags[@]}" "${sanitize_flags[@]}" -DTKI_BLOCK_LIMIT=274 -Icsrc -Itests/c \
    tests/c/test_block_limit.c csrc/*.c -o "$build/test_block_limit"
if "$build/test_block_limit"; then
    echo "sanitize: test_block_limit passed"
else
    echo "sanitize: test_block_limit FAILED" >&2
    status=1
fi

# 4b. test_pattern: compiled pre-split patterns (their programs written by the compiler in
#     Python, standard library only), plain and failing each allocation in turn.
python3 tests/fuzz/gen_pattern_programs.py "$build/patterns"
export TKI_PATTERN_DIR="$build/patterns"
"$cc" "${warning_flags[@]}" "${sanitize_flags[@]}" -Icsrc -Itests/c \
    tests/c/test_pattern.c csrc/*.c -o "$build/test_pattern"
"$cc" "${warning_flags[@]}" "${sanitize_flags[@]}" -DTKI_TEST_ALLOC_FAILURES \
    -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc -Icsrc -Itests/c \
    tests/c/test_pattern.c csrc/*.c -o "$build/test_pattern_alloc_failures"
if "$build/test_pattern" "$TKI_PATTERN_DIR" &&
    "$build/test_pattern_alloc_failures" "$TKI_PATTERN_DIR" --alloc-failures-only >/dev/null; then
    echo "sanitize: test_pattern passed"
else
    echo "sanitize: test_pattern FAILED" >&2
    status=1
fi

# 5. Replay the fuzz regressions (the same targets, without libFuzzer).
replayed=0
for source in tests/fuzz/fuzz_*.c; do
    target="$(basename "$source" .c)"
    target="${target#fuzz_}"
    inputs=()
    if [ -d "tests/fuzz/regressions/$target" ]; then
        while IFS= read -r -d '' file; do
            inputs+=("$file")
        done < <(find "tests/fuzz/regressions/$target" -type f ! -name '.*' ! -name '*.md' -print0 | sort -z)
    fi
    if [ "${#inputs[@]}" -eq 0 ]; then
        continue
    fi
    "$cc" "${warning_flags[@]}" "${sanitize_flags[@]}" -Icsrc -Itests/c -Itests/fuzz \
        "$source" tests/fuzz/replay_main.c csrc/*.c -o "$build/replay_$target"
    if TKI_RANKS_DIR="$root/tiktoken_inc/ranks" "$build/replay_$target" "${inputs[@]}" >"$build/replay_$target.log" 2>&1; then
        replayed=$((replayed + ${#inputs[@]}))
    else
        echo "sanitize: a regression input of $target FAILED:" >&2
        tail -n 40 "$build/replay_$target.log" >&2
        status=1
    fi
done
echo "sanitize: replayed $replayed fuzz regression inputs"
echo "sanitize: done in $((SECONDS - start)) s, status $status"
exit "$status"
