"""The on-disk cache of built tables (tiktoken_inc/_cache.py).

Each check runs fresh processes with TIKTOKEN_INC_CACHE_DIR pointing at a temp dir: a cold
process builds and writes the image, a warm one maps it, a damaged or truncated image is
rebuilt and replaced, concurrent cold processes all succeed and leave one valid image, and
with the cache turned off (empty variable) nothing is written.  Every process prints the
ids of the same text, which must equal tiktoken's.
"""
from __future__ import annotations

import os
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import OUTSIDE_TREE

TEXT = "Hello, world! 你好 😀  tabs\tand\nnewlines <|endoftext|> don't"
CHILD = (
    "import sys, tiktoken_inc;"
    "enc = tiktoken_inc.get_encoding(sys.argv[1]);"
    "print(enc.encode(sys.argv[2], disallowed_special=()))"
)


def run(cache: str, name: str = "cl100k_base") -> str:
    env = dict(os.environ, TIKTOKEN_INC_CACHE_DIR=cache)
    result = subprocess.run(
        [sys.executable, "-c", CHILD, name, TEXT], env=env, capture_output=True, text=True, timeout=300,
        cwd=OUTSIDE_TREE,  # outside the source tree: the child imports the installed package
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def images(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.tkivocab"))


@pytest.fixture
def expected(reference):
    return str(reference("cl100k_base").encode(TEXT, disallowed_special=()))


def test_cold_then_warm(tmp_path, expected):
    assert run(str(tmp_path)) == expected
    [image] = images(tmp_path)
    written = image.stat().st_mtime_ns
    assert run(str(tmp_path)) == expected
    assert image.stat().st_mtime_ns == written  # read, not rewritten
    assert not list(tmp_path.glob(".tmp-*"))


@pytest.mark.parametrize("damage", ["flip_a_byte", "truncate", "empty", "garbage"])
def test_damaged_image_is_rebuilt(tmp_path, expected, damage):
    run(str(tmp_path))
    [image] = images(tmp_path)
    good = image.read_bytes()
    if damage == "flip_a_byte":
        data = bytearray(good)
        data[len(data) // 2] ^= 0x40
        image.write_bytes(bytes(data))
    elif damage == "truncate":
        image.write_bytes(good[: len(good) // 3])
    elif damage == "empty":
        image.write_bytes(b"")
    else:
        image.write_bytes(os.urandom(4096))
    damaged_inode = image.stat().st_ino
    assert run(str(tmp_path)) == expected
    assert image.read_bytes() == good  # replaced by a fresh, identical image
    # ... a new file renamed over the damaged one, never written in place: a file that
    # other processes map must not change under them (truncated, it kills them: SIGBUS).
    assert image.stat().st_ino != damaged_inode


def _sections(path: Path) -> list[tuple[int, int]]:
    """(offset, size) of each table of the image at `path`, in image order."""
    from tiktoken_inc._cache import _map
    from tiktoken_inc._native import NativeVocab
    from tiktoken_inc._tki import ffi, lib

    vocab = NativeVocab.from_image(_map(str(path)))
    assert vocab is not None
    size, data, padding = ffi.new("uint64_t *"), ffi.new("uint8_t **"), ffi.new("uint64_t *")
    assert lib.tki_vocab_image_header(vocab._vocab, ffi.NULL, 0, size) == lib.TKI_OK
    at, sections, index = size[0], [], 0
    while lib.tki_vocab_image_piece(vocab._vocab, index, data, size, padding) == lib.TKI_OK:
        sections.append((at, size[0]))
        at += size[0] + padding[0]
        index += 1
    return sections


def _seal(image: bytearray) -> None:
    """Makes the image's checksum match its (edited) tables, as an attacker would."""
    from tiktoken_inc._tki import ffi, lib

    assert lib.tki_vocab_image_seal(ffi.from_buffer(image), len(image)) == lib.TKI_OK


#: A child that uses what a crafted image could break: the one-shot encoder's step (an
#: emoji is no token: its bytes are stepped), a special token, and decoding.
CRAFTED_CHILD = (
    "import sys, tiktoken_inc;"
    "enc = tiktoken_inc.get_encoding(sys.argv[1]);"
    "ids = enc.encode(sys.argv[2], allowed_special='all');"
    "print(ids, enc.decode(ids) == sys.argv[2])"
)


@pytest.mark.parametrize(
    "craft", ["rule_of_no_bytes", "transition_past_the_table", "special_past_the_pool", "hash_of_2_60_slots"]
)
def test_crafted_image_is_rebuilt(tmp_path, reference, craft):
    """An image whose tables are wrong but whose checksum matches (the checksum is not keyed:
    anyone who can write the file can make it match) is refused and rebuilt: the ids are
    right, nothing crashes (under AddressSanitizer in .ci/sanitize_python.sh either), and
    the file is replaced by a good image.  Each craft crashed or hung a process that
    trusted the tables."""
    cl100k = reference("cl100k_base")
    want = f"{cl100k.encode(TEXT, allowed_special='all')} True"
    env = dict(os.environ, TIKTOKEN_INC_CACHE_DIR=str(tmp_path))

    def child() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", CRAFTED_CHILD, "cl100k_base", TEXT], env=env, capture_output=True,
            text=True, timeout=300, cwd=OUTSIDE_TREE,
        )

    assert child().stdout.strip() == want
    [path] = images(tmp_path)
    good = path.read_bytes()
    image = bytearray(good)
    sections = _sections(path)
    offsets, rules, automaton = sections[1], sections[6], sections[7]
    if craft == "rule_of_no_bytes":  # read_back stepped back by 0 bytes, writing past its output
        rank = cl100k.encode("😀")[-1]
        struct.pack_into("<H", image, rules[0] + 16 * rank + 12, 0)
    elif craft == "transition_past_the_table":  # the root's next state for the byte 0xF0
        struct.pack_into("<I", image, automaton[0] + 64 * (1 + 0xF) + 4 * 0x0, 0xFFFFFF)
    elif craft == "special_past_the_pool":  # decoding <|endoftext|> read 2^40 bytes away
        struct.pack_into("<Q", image, offsets[0] + 8 * cl100k.eot_token, 1 << 40)
    else:  # the header's hash mask: the table's size wrapped around and passed
        slots = sections[4][1] // 16
        [at] = [at for at in range(8, 128, 8) if struct.unpack_from("<Q", image, at)[0] == slots - 1]
        struct.pack_into("<Q", image, at, (1 << 60) - 1)
    _seal(image)
    path.write_bytes(bytes(image))
    result = child()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == want
    assert path.read_bytes() == good  # refused, rebuilt and replaced


def test_concurrent_cold_processes(tmp_path, expected):
    env = dict(os.environ, TIKTOKEN_INC_CACHE_DIR=str(tmp_path))
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, "cl100k_base", TEXT], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, cwd=OUTSIDE_TREE,
        )
        for _ in range(4)
    ]
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        assert out.strip() == expected
    assert len(images(tmp_path)) == 1
    assert not list(tmp_path.glob(".tmp-*"))
    assert run(str(tmp_path)) == expected


def test_cache_off_writes_nothing(tmp_path, expected, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # where the default cache would go
    assert run("") == expected
    assert not list(tmp_path.rglob("*.tkivocab"))


def test_special_tokens_share_one_image(tmp_path, reference):
    """Encodings that differ only in their special tokens share one image: it holds the
    mergeable tokens, and each process adds its encoding's special tokens once mapped."""
    for name in ["o200k_base", "o200k_harmony", "p50k_base", "p50k_edit"]:
        run(str(tmp_path), name)
    assert len(images(tmp_path)) == 2
    text = TEXT + "<|start|><|fim_middle|><|reserved_200100|>"
    child = CRAFTED_CHILD.replace("print(ids,", "print(len(enc.special_tokens_set), ids,")
    for name in ["o200k_harmony", "o200k_base", "p50k_edit", "p50k_base"]:  # warm, both ways
        encoding = reference(name)
        want = f"{len(encoding.special_tokens_set)} {encoding.encode(text, allowed_special='all')} True"
        result = subprocess.run(
            [sys.executable, "-c", child, name, text], env=dict(os.environ, TIKTOKEN_INC_CACHE_DIR=str(tmp_path)),
            capture_output=True, text=True, timeout=300, cwd=OUTSIDE_TREE,
        )
        assert result.stdout.strip() == want, result.stderr
    assert len(images(tmp_path)) == 2


def _child(env_changes: dict[str, "str | None"], name: str = "cl100k_base") -> subprocess.CompletedProcess:
    """The CHILD process with these environment variables set (or, for None, unset)."""
    env = dict(os.environ)
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run(
        [sys.executable, "-W", "always", "-c", CHILD, name, TEXT], env=env, capture_output=True,
        text=True, timeout=120, cwd=OUTSIDE_TREE,
    )


def _another_vocabulary_in_place(tmp_path: Path, directory: Path) -> Path:
    """The image of r50k_base where cl100k_base's would be in `directory`: consistent tables
    (they pass every check), but of another vocabulary, so that any process that read them
    would print wrong ids."""
    source = tmp_path / "source"
    source.mkdir(mode=0o700)
    run(str(source), "cl100k_base")
    [cl100k_image] = images(source)
    cl100k_image.unlink()
    run(str(source), "r50k_base")
    [r50k_image] = images(source)
    target = directory / cl100k_image.name
    target.write_bytes(r50k_image.read_bytes())
    target.chmod(0o600)
    return target


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770])
def test_directory_writable_by_others_is_not_used(tmp_path, expected, mode):
    """A cache directory that others can write to (sticky or not, by its group or by all) is
    not used: anyone who can create files there could make every process that loads from
    it read their tables.  The tables are built in memory, a warning says why, and nothing
    is read from or written to the directory."""
    shared = tmp_path / "shared"
    shared.mkdir()
    planted = _another_vocabulary_in_place(tmp_path, shared)
    planted_bytes = planted.read_bytes()
    shared.chmod(mode)
    result = _child({"TIKTOKEN_INC_CACHE_DIR": str(shared)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected  # the planted tables were not read
    assert "does not use the table cache" in result.stderr and "others can write" in result.stderr
    assert images(shared) == [planted] and planted.read_bytes() == planted_bytes
    assert not list(shared.glob(".tmp-*"))


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to give a directory away")
def test_directory_of_another_user_is_not_used(tmp_path, expected):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    planted = _another_vocabulary_in_place(tmp_path, theirs)
    os.chown(theirs, 12345, 12345)
    result = _child({"TIKTOKEN_INC_CACHE_DIR": str(theirs)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected
    assert "belongs to user id 12345" in result.stderr
    assert images(theirs) == [planted]


@pytest.mark.parametrize("intruder", ["fifo", "symlink", "writable_by_others", "directory"])
def test_only_regular_files_of_the_user_are_read(tmp_path, expected, intruder):
    """Where the image should be: a FIFO (opening it used to hang), a symbolic link (to an
    image of another vocabulary), an image others can write to, a directory.  None is
    read; the process neither hangs nor gives wrong ids, and a regular image of the user's
    replaces the intruder."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    planted = _another_vocabulary_in_place(tmp_path, cache)
    if intruder == "fifo":
        planted.unlink()
        os.mkfifo(planted, 0o600)
    elif intruder == "symlink":
        elsewhere = tmp_path / "elsewhere.tkivocab"
        planted.rename(elsewhere)
        planted.symlink_to(elsewhere)
    elif intruder == "writable_by_others":
        planted.chmod(0o666)
    else:
        planted.unlink()
        planted.mkdir()
    result = _child({"TIKTOKEN_INC_CACHE_DIR": str(cache)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected
    if intruder != "directory":  # (a directory cannot be renamed over)
        info = os.lstat(planted)
        assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
        assert _child({"TIKTOKEN_INC_CACHE_DIR": str(cache)}).stdout.strip() == expected


def _unset_cache_variables() -> dict[str, "str | None"]:
    return {"TIKTOKEN_INC_CACHE_DIR": None, "XDG_CACHE_HOME": None}


@pytest.mark.parametrize("home", ["missing", "read_only", "a_file"])
def test_without_a_usable_home_the_cache_is_per_user_in_tmp(tmp_path, expected, home):
    """With HOME unset, missing, read-only or not a directory (and no XDG_CACHE_HOME), the
    cache is `tiktoken_inc-<uid>` in the temporary directory (mode 0700), not a directory
    under a home that is not there, and not nothing (a rebuild in every process)."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    changes = {**_unset_cache_variables(), "TMPDIR": str(temporary)}
    uid = os.getuid()
    if home == "missing":
        changes["HOME"] = str(tmp_path / "no-such-home")
    elif home == "read_only":
        if not os.path.isdir("/proc/self"):
            pytest.skip("needs /proc: a directory not even root can write to")
        changes["HOME"] = "/proc/self"
    else:
        (tmp_path / "a-file").write_bytes(b"")
        changes["HOME"] = str(tmp_path / "a-file")
    result = _child(changes)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected
    per_user = temporary / f"tiktoken_inc-{uid}"
    info = per_user.stat()
    assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == uid
    assert len(images(per_user)) == 1
    assert "does not use" not in result.stderr
    assert _child(changes).stdout.strip() == expected


def test_home_unset_and_not_in_the_password_database(tmp_path, monkeypatch):
    """With HOME unset, the home is the password database's; where that is not there (a
    service account's /nonexistent), the cache is per user in the temporary directory."""
    import pwd
    import tempfile

    from tiktoken_inc import _cache

    class Nowhere:
        pw_dir = str(tmp_path / "nonexistent")

    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("TIKTOKEN_INC_CACHE_DIR", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: Nowhere)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    directory = _cache.cache_dir()
    assert directory == str(tmp_path / f"tiktoken_inc-{os.getuid()}")
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert not (tmp_path / "nonexistent").exists()


def test_cache_goes_to_xdg_cache_home(tmp_path, expected):
    result = _child({**_unset_cache_variables(), "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert result.stdout.strip() == expected, result.stderr
    directory = tmp_path / "xdg" / "tiktoken_inc"
    assert len(images(directory)) == 1 and stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_images_of_other_builds_are_cleaned_up(tmp_path, expected):
    """Writing an image removes the same vocabulary's images by other core builds but the
    newest two, and temporary files older than an hour; nothing else."""
    run(str(tmp_path))
    [image] = images(tmp_path)
    vocabulary_key = image.name.split("-", 1)[0]
    image.unlink()
    now = time.time()
    builds = []
    for age_days, core in enumerate(["a" * 16, "b" * 16, "c" * 16, "d" * 16]):
        other = tmp_path / f"{vocabulary_key}-{core}.tkivocab"
        other.write_bytes(b"an image of another build")
        os.utime(other, (now - 86400 * (age_days + 1),) * 2)
        builds.append(other)
    unrelated = tmp_path / f"{'f' * 32}-{'a' * 16}.tkivocab"
    unrelated.write_bytes(b"another vocabulary")
    os.utime(unrelated, (now - 86400 * 30,) * 2)
    old_temporary, fresh_temporary = tmp_path / ".tmp-old.tkivocab", tmp_path / ".tmp-fresh.tkivocab"
    old_temporary.write_bytes(b"")
    fresh_temporary.write_bytes(b"")
    os.utime(old_temporary, (now - 7200,) * 2)

    assert run(str(tmp_path)) == expected  # cold: builds, writes, cleans up
    deadline = time.time() + 60
    while builds[2].exists() and time.time() < deadline:  # the write ends with the process
        time.sleep(0.1)
    assert image.exists()
    assert [other.exists() for other in builds] == [True, True, False, False]
    assert unrelated.exists() and fresh_temporary.exists() and not old_temporary.exists()
    assert run(str(tmp_path)) == expected  # the new image is the one in use


#: A child that builds (or unpickles) a custom encoding, a copy of cl100k_base's ranks, and
#: says whether its tables were mapped from an image, then its ids and a decode of them.
CUSTOM_CHILD = r"""
import pickle, sys, tiktoken_inc
mode, argument = sys.argv[1], sys.argv[2]
if mode == "unpickle":
    with open(argument, "rb") as file:
        enc = pickle.load(file)
else:  # (the ranks read from the bundled file: get_encoding would cache its own image)
    from tiktoken_inc.registry import CL100K_PAT_STR, bundled_ranks
    ranks = dict(bundled_ranks("cl100k_base"))
    if mode == "empty_token":
        ranks[b""] = 200000  # the largest id: decoded last below
    enc = tiktoken_inc.Encoding(
        "custom", pat_str=CL100K_PAT_STR, mergeable_ranks=ranks,
        special_tokens={"<|custom|>": int(argument), "<|endoftext|>": 100257},
    )
ids = enc.encode(sys.argv[3], allowed_special="all")
mapped = hasattr(enc._core_bpe._vocab, "_image")
print(mapped, ids, repr(enc.decode_bytes(ids + [enc.max_token_value])))
"""


def _custom(cache: Path, mode: str, argument: str, text: str = TEXT + "<|custom|>") -> tuple[bool, str]:
    result = subprocess.run(
        [sys.executable, "-c", CUSTOM_CHILD, mode, argument, text],
        env=dict(os.environ, TIKTOKEN_INC_CACHE_DIR=str(cache)), capture_output=True, text=True,
        timeout=300, cwd=OUTSIDE_TREE,
    )
    assert result.returncode == 0, result.stderr
    mapped, rest = result.stdout.strip().split(" ", 1)
    return mapped == "True", rest


def test_custom_encodings_are_cached(tmp_path, reference):
    """A custom Encoding (its ranks a dict, here cl100k_base's copied) is cached like a
    bundled one, keyed by its ranks: a later process maps the image, with its own special
    tokens (encodings that differ only in them share the image)."""
    cl100k = reference("cl100k_base")
    import tiktoken

    def want(custom_id: int) -> str:
        enc = tiktoken.Encoding(
            "custom", pat_str=cl100k._pat_str, mergeable_ranks=cl100k._mergeable_ranks,
            special_tokens={"<|custom|>": custom_id, "<|endoftext|>": 100257},
        )
        ids = enc.encode(TEXT + "<|custom|>", allowed_special="all")
        return f"{ids} {enc.decode_bytes(ids + [enc.max_token_value])!r}"

    assert _custom(tmp_path, "build", "100300") == (False, want(100300))  # cold: built, stored
    [image] = images(tmp_path)
    written = image.stat().st_mtime_ns
    assert _custom(tmp_path, "build", "100300") == (True, want(100300))  # warm: mapped
    assert _custom(tmp_path, "build", "100277") == (True, want(100277))  # other specials: same image
    assert images(tmp_path) == [image] and image.stat().st_mtime_ns == written


def test_unpickled_custom_encoding_maps_its_tables(tmp_path):
    """A worker that unpickles a custom encoding maps its tables from the cache (what a
    process pool or Ray task does): the same ids as the encoding that was pickled."""
    import pickle

    import tiktoken_inc

    from tiktoken_inc.registry import CL100K_PAT_STR, bundled_ranks

    enc = tiktoken_inc.Encoding(
        "custom", pat_str=CL100K_PAT_STR, mergeable_ranks=dict(bundled_ranks("cl100k_base")),
        special_tokens={"<|custom|>": 100300, "<|endoftext|>": 100257},
    )
    path = tmp_path / "encoding.pickle"
    path.write_bytes(pickle.dumps(enc))
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    ids = enc.encode(TEXT + "<|custom|>", allowed_special="all")
    want = f"{ids} {enc.decode_bytes(ids + [enc.max_token_value])!r}"
    assert _custom(cache, "unpickle", str(path)) == (False, want)  # the first worker builds
    assert _custom(cache, "unpickle", str(path)) == (True, want)  # the next ones map
    assert len(images(cache)) == 1


def test_custom_empty_token_survives_the_cache(tmp_path):
    """An empty mergeable token (decode-only in the C tables, as a special token is) is given
    back to tables mapped from the cache: its id still decodes, to nothing."""
    cold = _custom(tmp_path, "empty_token", "100300", "x")
    warm = _custom(tmp_path, "empty_token", "100300", "x")
    assert cold == (False, cold[1]) and warm == (True, cold[1])
    assert cold[1].endswith("b'x'")  # max_token_value is the empty token: it adds nothing


def test_small_custom_encodings_are_not_cached(tmp_path):
    """A vocabulary under CACHED_TOKENS_AT_LEAST tokens builds in milliseconds: it is not
    cached (a test suite that makes thousands would fill the cache)."""
    from tiktoken_inc._cache import CACHED_TOKENS_AT_LEAST

    script = (
        "import tiktoken_inc;"
        "ranks = {bytes([b]): b for b in range(256)} | {b'ab': 256};"
        "enc = tiktoken_inc.Encoding('small', pat_str=None, mergeable_ranks=ranks, special_tokens={});"
        "print(enc.encode('abab'))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], env=dict(os.environ, TIKTOKEN_INC_CACHE_DIR=str(tmp_path)),
        capture_output=True, text=True, timeout=60, cwd=OUTSIDE_TREE,
    )
    assert result.stdout.strip() == "[256, 256]", result.stderr
    assert CACHED_TOKENS_AT_LEAST > 257 and images(tmp_path) == []


def test_ranks_key_is_the_same_in_every_process(tmp_path):
    """The key of a dict of ranks depends on its items and their order only: the same in a
    child (another process, other object addresses and reference counts) as here."""
    from tiktoken_inc._cache import ranks_key

    ranks = {bytes([b]): b for b in range(256)} | {bytes([a, b]): 256 + 256 * a + b for a in range(64) for b in range(256)}
    here = ranks_key(ranks)
    script = (
        "from tiktoken_inc._cache import ranks_key;"
        "ranks = {bytes([b]): b for b in range(256)} | {bytes([a, b]): 256 + 256 * a + b for a in range(64) for b in range(256)};"
        "print(ranks_key(ranks))"
    )
    child = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=OUTSIDE_TREE)
    assert here is not None and child.stdout.strip() == here, child.stderr
    reordered = dict(reversed(list(ranks.items())))
    assert ranks_key(reordered) not in (None, here)  # another image, never a wrong one
    assert ranks_key({**ranks, b"\x00\x00": True}) != here  # True is no 0: other bytes
