#!/usr/bin/env bash
# .ci/other_pythons.sh — owns the check of the oldest and the newest Python the package
# supports (requires-python >= 3.9) beside the one the rest of CI runs: for each of 3.9 and
# 3.13 found (on the PATH, or among pyenv's versions), the package installed from a copy of
# the sources into a fresh virtualenv (the C core compiled for that Python), then the tests
# of tiktoken's API, the drop-in behaviour, special tokens, streams, threads and allocation
# failures, against tiktoken, from outside the source tree.  The tests that measure how
# work grows are left to stage 4, which runs alone.  A Python that is not installed is
# named and passed over.  Run from anywhere; exits non-zero on any failure.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=.ci/sources.sh
source .ci/sources.sh
root="$PWD"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

copy_sources "$work/src"

for version in 3.9 3.13; do
    # On the PATH, or installed by pyenv but not selected (its shim then refuses to run).
    python=""
    for candidate in "python$version" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/"python$version"; do
        if "$candidate" -c 'import sys' >/dev/null 2>&1; then
            python="$candidate"
        fi
    done
    if [ -z "$python" ]; then
        echo "other_pythons: python$version is not installed here, passed over"
        continue
    fi
    start=$SECONDS
    "$python" -m venv "$work/venv$version"
    "$work/venv$version/bin/pip" install -q "$work/src" pytest hypothesis numpy
    (
        cd "$work"  # import the installed package, not the source tree
        "$work/venv$version/bin/python" -m pytest -q -p no:cacheprovider --rootdir "$root" \
            "$root/tests/test_encoding_api.py" "$root/tests/test_drop_in.py" \
            "$root/tests/test_special_tokens.py" "$root/tests/test_streaming.py" \
            "$root/tests/test_threads.py" "$root/tests/test_memory.py" \
            -k "$not_timing_tests"
    )
    echo "other_pythons: $("$python" --version) passed ($((SECONDS - start)) s)"
done
