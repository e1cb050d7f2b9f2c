#!/usr/bin/env bash
# .ci/wheel_smoke.sh — owns the packaging check: `python -m build` makes an sdist and a wheel
# with no setuptools warning, both holding the LICENSE; the wheel installs with the network
# off (pip --no-index, from a wheelhouse of its dependencies fetched beforehand) into a fresh
# virtualenv, and a smoke test passes from a directory outside the source tree.  Run from
# anywhere; exits non-zero on any failure.
set -euo pipefail

cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python3 -m venv "$work/builder"
"$work/builder/bin/pip" install -q build
"$work/builder/bin/python" -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || {
    cat "$work/build.log" >&2
    exit 1
}
if grep -E "SetuptoolsDeprecationWarning|_BetaConfiguration|is absent from the .packages." "$work/build.log"; then
    echo "wheel_smoke: setuptools warned while building (above)" >&2
    exit 1
fi
wheel="$(ls "$work"/dist/*.whl)"
sdist="$(ls "$work"/dist/*.tar.gz)"
# The license travels with both (pyproject.toml's license-files).
wheel_files="$(python3 -m zipfile -l "$wheel")"
sdist_files="$(tar tzf "$sdist")"
grep -q "dist-info/licenses/LICENSE" <<<"$wheel_files" || {
    echo "wheel_smoke: the wheel holds no LICENSE" >&2
    exit 1
}
grep -q "^[^/]*/LICENSE$" <<<"$sdist_files" || {
    echo "wheel_smoke: the sdist holds no LICENSE" >&2
    exit 1
}

# The dependencies, fetched first; then the install itself with no index at all.
"$work/builder/bin/pip" download -q -d "$work/wheelhouse" "$wheel"
python3 -m venv "$work/fresh"
"$work/fresh/bin/pip" install -q --no-index --find-links "$work/wheelhouse" "$wheel"
mkdir "$work/elsewhere"
cd "$work/elsewhere"
"$work/fresh/bin/python" - <<'PY'
import tiktoken_inc
enc = tiktoken_inc.get_encoding("o200k_base")
assert enc.encode("hello world") == [24912, 2375], enc.encode("hello world")
assert enc.incremental
assert tiktoken_inc.get_encoding("cl100k_base").decode([15339, 1917]) == "hello world"
print("wheel_smoke: the wheel works outside the source tree:", tiktoken_inc.__file__)
PY
"$work/fresh/bin/tiktoken-inc" --version
