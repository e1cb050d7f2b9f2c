#!/usr/bin/env bash
# .ci/tiktoken_tests.sh — owns running tiktoken's own test suite against tiktoken_inc.  The
# tests are not copied into this repository: they are taken from tiktoken's sdist on PyPI
# (the version installed here, 0.14.0 today), their `import tiktoken` rewritten to
# `import tiktoken_inc as tiktoken`, and run with the Python on PATH (where tiktoken_inc
# and the test extra are installed), from a directory outside the source tree.
# None of them needs the network with tiktoken_inc (its encodings ship with it), so none
# is skipped.  Exits non-zero on any failure.
set -euo pipefail

cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

version="$(python -c 'import tiktoken; print(tiktoken.__version__)')"
python -m pip download -q --no-binary :all: --no-deps --no-build-isolation "tiktoken==$version" -d "$work/sdist" 2>/dev/null ||
    python -m pip download -q --no-binary :all: --no-deps "tiktoken==$version" -d "$work/sdist"
tar xzf "$work"/sdist/tiktoken-"$version".tar.gz -C "$work"
mkdir "$work/suite"
cp -r "$work/tiktoken-$version/tests" "$work/suite/tests"
# The one rewrite: the module under test (top-level imports and the subprocess programs).
sed -i -E 's/^([[:space:]]*)import tiktoken$/\1import tiktoken_inc as tiktoken/' "$work"/suite/tests/*.py
if grep -nE '^[[:space:]]*(from|import) tiktoken([. ]|$)' "$work"/suite/tests/*.py | grep -v "tiktoken_inc"; then
    echo "tiktoken_tests: an import of tiktoken is left (above): extend the rewrite" >&2
    exit 1
fi
echo "tiktoken_tests: tiktoken $version's tests against tiktoken_inc"
cd "$work/suite"
python -m pytest -q -p no:cacheprovider tests
