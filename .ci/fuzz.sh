#!/usr/bin/env bash
# .ci/fuzz.sh [SECONDS] — owns the fuzzing run of the C core: builds each
# libFuzzer target tests/fuzz/fuzz_<target>.c with clang
# (-fsanitize=fuzzer,address,undefined), seeds its corpus, runs it for
# SECONDS (default 60; two targets at a time, TKI_FUZZ_JOBS to change), copies
# any crashing input into tests/fuzz/regressions/<target>/, replays every
# regression input, and prints the number of executions per target.
# Installs clang and its libFuzzer runtime from Debian's packages if missing.
# Run from anywhere; exits non-zero on any failure.
set -euo pipefail

cd "$(dirname "$0")/.."
root="$PWD"
seconds="${1:-60}"
jobs="${TKI_FUZZ_JOBS:-2}"
build="${TKI_FUZZ_BUILD_DIR:-$root/build/fuzz}"
mkdir -p "$build"

case "$seconds" in
'' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac

ci_name=fuzz
# shellcheck source=.ci/apt.sh
source "$root/.ci/apt.sh"

fuzz_flags=(-std=c11 -Wall -Wextra -Werror -g -O1 -fno-omit-frame-pointer
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)

# Can clang link and run a libFuzzer target with the sanitizers?
fuzzer_works() {
    command -v clang >/dev/null 2>&1 || return 1
    printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
        'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
        >"$build/probe.c"
    clang "${fuzz_flags[@]}" "$build/probe.c" -o "$build/probe" >/dev/null 2>&1 &&
        "$build/probe" -runs=1 >/dev/null 2>&1
}

if ! fuzzer_works; then
    echo "fuzz: installing clang and libFuzzer"
    command -v clang >/dev/null 2>&1 || apt_install clang
    if ! fuzzer_works; then
        # The libFuzzer runtime: libclang-rt-N-dev on Debian 12, else libfuzzer-N-dev.
        major="$(clang -dumpversion | cut -d. -f1)"
        for package in "libclang-rt-$major-dev" "libfuzzer-$major-dev"; do
            apt_update_once
            if apt-cache show "$package" >/dev/null 2>&1; then
                apt_install "$package"
                fuzzer_works && break
            fi
        done
    fi
    fuzzer_works || { echo "fuzz: clang cannot build libFuzzer targets" >&2; exit 1; }
fi
echo "fuzz: $(clang --version | head -n 1)"

targets=()
for source in tests/fuzz/fuzz_*.c; do
    name="$(basename "$source" .c)"
    targets+=("${name#fuzz_}")
done

# each FUNCTION ITEM...: FUNCTION ITEM for every ITEM, in the background, `jobs` at a time;
# returns when all have ended (each FUNCTION writes its own exit status to a file).
each() {
    local function="$1" item
    shift
    for item in "$@"; do
        "$function" "$item" &
        while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 0.2; done
    done
    wait || true
}

# Build: the core's sources once (they are the same in every target), then each target
# linked with them; both steps `jobs` at a time.
compile_core() {
    local source="$1" rc=0
    local object="$build/core/$(basename "$source" .c).o"
    clang "${fuzz_flags[@]}" -Icsrc -c "$source" -o "$object" >"$object.log" 2>&1 || rc=$?
    echo "$rc" >"$object.rc"
}
build_target() {
    local target="$1" rc=0
    rm -f "$build/fuzz_$target" "$build/build_$target.rc"
    clang "${fuzz_flags[@]}" -Icsrc -Itests/c -Itests/fuzz "tests/fuzz/fuzz_$target.c" "$build"/core/*.o \
        -o "$build/fuzz_$target" >"$build/build_$target.log" 2>&1 || rc=$?
    echo "$rc" >"$build/build_$target.rc"
}
start=$SECONDS
rm -rf "$build/core"
mkdir -p "$build/core"
each compile_core csrc/*.c
for source in csrc/*.c; do
    object="$build/core/$(basename "$source" .c).o"
    if [ "$(cat "$object.rc" 2>/dev/null || echo 99)" != 0 ]; then
        echo "fuzz: compiling $source FAILED:" >&2
        cat "$object.log" >&2
        exit 1
    fi
done
each build_target "${targets[@]}"
for target in "${targets[@]}"; do
    if [ "$(cat "$build/build_$target.rc" 2>/dev/null || echo 99)" != 0 ]; then
        echo "fuzz: building $target FAILED:" >&2
        cat "$build/build_$target.log" >&2
        exit 1
    fi
done
echo "fuzz: built ${#targets[@]} targets in $((SECONDS - start)) s"

export TKI_RANKS_DIR="$root/tiktoken_inc/ranks"
# The compiled programs of the known pre-split patterns (fuzz_pattern reads them).
python3 tests/fuzz/gen_pattern_programs.py "$build/patterns"
export TKI_PATTERN_DIR="$build/patterns"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# Seed corpora (kept in the build directory between runs).
seed() { # target name bytes (printf format)
    mkdir -p "$build/corpus/$1"
    # shellcheck disable=SC2059
    printf "$3" >"$build/corpus/$1/seed_$2"
}
texts=(
    'Hello, world!\n' ' @param' '"""' "don't they're we'll I'M" '  \n\n\t x\r\n  y  '
    '\xe4\xb8\xad\xe6\x96\x87 text \xf0\x9f\x98\x80 caf\xc3\xa9' '1234567 3.14159 0x1F'
    'def f(x):\n    return x  # comment\n' '\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x28\x8c\xbc\xed\xa0\x80'
    "HELLO'S World's Don'T" '<|endoftext|>' '                                        a'
)
for i in "${!texts[@]}"; do
    for target in encode_text pretokenize pattern; do
        seed "$target" "text$i" "${texts[$i]}"
    done
done
shared_corpora="$root/../shared/corpora"
if [ -d "$shared_corpora" ]; then
    for file in "$shared_corpora"/*.txt; do
        [ -f "$file" ] || continue
        name="$(basename "$file" .txt)"
        for part in 0 1 2; do
            for target in encode_text pretokenize pattern; do
                mkdir -p "$build/corpus/$target"
                dd if="$file" of="$build/corpus/$target/seed_${name}_$part" bs=512 \
                    skip=$((part * 97)) count=1 status=none
            done
        done
    done
fi
# The stream target: header (pattern and vocabulary: r50k, cl100k, o200k's pattern with cl100k's
# ranks, cl100k with allowed specials; a cap of 40), feeds of 70, 100 and 65 bytes and then the
# rest, and text longer than a window, so that the windows that split a stream's pending text
# and the per-piece matcher near its end both run from the start.
stream_headers=('\x01' '\x06' '\x07' '\x0e')
long_text="${texts[*]}${texts[*]}"
for h in "${!stream_headers[@]}"; do
    seed stream "text$h" "${stream_headers[$h]}"'\x28\x46\x00\x64\x00\x41\x00\x00\x00'"$long_text"
    if [ -d "$shared_corpora" ]; then
        for file in "$shared_corpora"/*.txt; do
            [ -f "$file" ] || continue
            name="$(basename "$file" .txt)"
            seed stream "${name}_$h" "${stream_headers[$h]}"'\x28\x46\x00\x64\x00\x41\x00\x00\x00'
            dd if="$file" bs=512 skip=$((h * 31)) count=2 status=none >>"$build/corpus/stream/seed_${name}_$h"
        done
    fi
done
seed build_encode a '\x01\x03\x02aa\x02ab\x03aab\x00\x00\x00aaaaabababab'
seed build_encode b '\x05\x06\x03aaa\x02aa\x04aaaa\x02ab\x02ba\x03bab\x07\x03\x01\x05\x02abababaabbaa'
seed build_encode c '\xf3\x0b\x04abcd\x02cd\x03ddd\x09aabbccdd\x05\x04\x03\x02\x01 abcd \xff\xe1\xe2'
seed pattern program_a '\xff\x03\x00\x1c\x07'
seed pattern program_b '\xff\x06\x40\x00\x00\x12\x34\xff'
seed decode a '\x00\x00\x03\x00\x05\x00\x07\x00\x04\x00\x02\x00\xe7\x03'
seed decode b '\x01\x05\x00\x00\x01\x00\xff\xff\x10\x00\xe8\x03'
seed decode c '\x02\x20\xca\x00\xd0\x02\xe6\x03\x04\x00'
# image: the three base images as they are, then a few edits of the header and the tables.
seed image a '\x00'
seed image b '\x01'
seed image c '\x02'
seed image d '\x00\x00\x40\x00\x00\x05\x02\x00\x10\x00\x00\xff\xff'
seed image e '\x01\x07\x48\x01\x00\x00\x00\x00\x00\x00\x10'
for file in tests/fuzz/regressions/image/*; do
    [ -f "$file" ] && cp "$file" "$build/corpus/image/seed_regression_$(basename "$file")"
done

# Run (two at a time).
max_len() { # longest input per target: short inputs run faster and find most
    case "$1" in
    build_encode) echo 512 ;;
    image) echo 256 ;;
    encode_text) echo 1024 ;;
    pretokenize | pattern) echo 2048 ;;
    *) echo 4096 ;;
    esac
}
run_target() {
    local target="$1" rc=0
    rm -f "$build/run_$target.rc" "$build/artifacts/$target"/* 2>/dev/null || true
    mkdir -p "$build/artifacts/$target" "$build/corpus/$target"
    "$build/fuzz_$target" "$build/corpus/$target" \
        -max_total_time="$seconds" -print_final_stats=1 -timeout=30 -rss_limit_mb=4096 \
        -max_len="$(max_len "$target")" -artifact_prefix="$build/artifacts/$target/" \
        >"$build/run_$target.log" 2>&1 || rc=$?
    echo "$rc" >"$build/run_$target.rc"
}
start=$SECONDS
each run_target "${targets[@]}"
echo "fuzz: ran ${#targets[@]} targets for ${seconds} s each in $((SECONDS - start)) s"

status=0
for target in "${targets[@]}"; do
    rc="$(cat "$build/run_$target.rc" 2>/dev/null || echo 99)"
    executions="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/run_$target.log" |
        grep -o '[0-9]*$' | tail -n 1 || true)"
    echo "fuzz: $target: ${executions:-?} executions, exit $rc"
    found=0
    for artifact in "$build/artifacts/$target"/crash-* "$build/artifacts/$target"/leak-* \
        "$build/artifacts/$target"/timeout-* "$build/artifacts/$target"/oom-*; do
        [ -f "$artifact" ] || continue
        mkdir -p "tests/fuzz/regressions/$target"
        cp "$artifact" "tests/fuzz/regressions/$target/"
        echo "fuzz: $target: saved tests/fuzz/regressions/$target/$(basename "$artifact")" >&2
        found=1
    done
    if [ "$rc" != 0 ] || [ "$found" -ne 0 ]; then
        echo "fuzz: $target FAILED; the end of its log:" >&2
        grep -v '^#[0-9]' "$build/run_$target.log" | tail -n 40 >&2
        status=1
    fi
done

# Replay every regression input.
replayed=0
for target in "${targets[@]}"; do
    inputs=()
    if [ -d "tests/fuzz/regressions/$target" ]; then
        while IFS= read -r -d '' file; do
            inputs+=("$file")
        done < <(find "tests/fuzz/regressions/$target" -type f ! -name '.*' ! -name '*.md' -print0 | sort -z)
    fi
    [ "${#inputs[@]}" -gt 0 ] || continue
    if "$build/fuzz_$target" -runs=1 "${inputs[@]}" >"$build/replay_$target.log" 2>&1; then
        replayed=$((replayed + ${#inputs[@]}))
    else
        echo "fuzz: replaying the regressions of $target FAILED:" >&2
        grep -v '^#[0-9]' "$build/replay_$target.log" | tail -n 40 >&2
        status=1
    fi
done
echo "fuzz: replayed $replayed regression inputs"
exit "$status"
