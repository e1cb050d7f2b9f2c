#!/usr/bin/env bash
# .ci/big_endian.sh — owns the big-endian run of the C core: builds tests/c/test_core.c
# together with csrc/*.c for s390x (a big-endian machine) and runs it under QEMU's
# user-mode emulation on the bundled r50k rank file, so that nothing in the core assumes
# the byte order of the machines it is developed on (the hash of short keys did: a
# big-endian machine missed them).  Installs the cross compiler and qemu-user from
# Debian's packages if missing.  Run from anywhere; exits non-zero on any failure.
set -euo pipefail

cd "$(dirname "$0")/.."
root="$PWD"
build="${TKI_BIG_ENDIAN_BUILD_DIR:-$root/build/big_endian}"
mkdir -p "$build"

ci_name=big_endian
# shellcheck source=.ci/apt.sh
source "$root/.ci/apt.sh"

if ! command -v s390x-linux-gnu-gcc >/dev/null 2>&1 || ! command -v qemu-s390x >/dev/null 2>&1; then
    echo "big_endian: installing the s390x cross compiler and qemu-user"
    apt_install gcc-s390x-linux-gnu libc6-dev-s390x-cross qemu-user
fi

start=$SECONDS
s390x-linux-gnu-gcc -std=c11 -Wall -Wextra -Werror -O2 -static -Icsrc -Itests/c \
    tests/c/test_core.c csrc/*.c -o "$build/test_core"
if qemu-s390x "$build/test_core" tiktoken_inc/ranks/r50k_base.tiktoken >"$build/test_core.log" 2>&1; then
    echo "big_endian: test_core passed on s390x ($((SECONDS - start)) s)"
else
    echo "big_endian: test_core FAILED on s390x; the end of its log:" >&2
    grep -v '^  ok' "$build/test_core.log" | tail -n 40 >&2
    exit 1
fi
