"""Writes the compiled programs of the known pre-split patterns to a directory (OUT/<name>.tkip),
for the C tests and the fuzz target of csrc/pattern.c:

    python3 tests/fuzz/gen_pattern_programs.py build/patterns

Needs only the standard library: the compiler (tiktoken_inc/_pattern.py) and its data are
imported from the source tree without the package's C extension, and tiktoken's own patterns
are read from tiktoken_inc/registry.py without running it.
"""
from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAMES = {"R50K_PAT_STR": "r50k", "CL100K_PAT_STR": "cl100k", "O200K_PAT_STR": "o200k"}


def builtin_patterns() -> dict[str, str]:
    """tiktoken's patterns as registry.py spells them (string literals, joined or concatenated)."""
    found = {}
    for node in ast.parse((ROOT / "tiktoken_inc" / "registry.py").read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and getattr(node.targets[0], "id", "") in NAMES:
            value = node.value
            if isinstance(value, ast.Call):  # "|".join([...])
                found[NAMES[node.targets[0].id]] = ast.literal_eval(value.func.value).join(ast.literal_eval(value.args[0]))
            else:
                found[NAMES[node.targets[0].id]] = ast.literal_eval(value)
    return found


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    package = types.ModuleType("tiktoken_inc")
    package.__path__ = [str(ROOT / "tiktoken_inc")]  # submodules without the package's __init__
    sys.modules["tiktoken_inc"] = package
    from tiktoken_inc._pattern import compile_pattern
    from tiktoken_inc.open_models import PATTERNS

    patterns = {**builtin_patterns(), **PATTERNS}
    assert len(patterns) == len(PATTERNS) + 3, sorted(patterns)
    for name, pat_str in patterns.items():
        (out / f"{name}.tkip").write_bytes(compile_pattern(pat_str))


if __name__ == "__main__":
    main()
