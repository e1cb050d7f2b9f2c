"""A plain-Python statement of tiktoken's BPE semantics: the oracle for small vocabularies.

Nothing here is fast or clever on purpose: `bpe_trace` is the merge rule written down
literally (start from single bytes; repeatedly merge the adjacent pair whose concatenation
has the lowest rank, the leftmost pair on a tie; stop when no adjacent pair concatenates to
a vocabulary entry).  The other helpers build on it: per-prefix last tokens, the
whole-piece shortcut, the canonical/proper classification of a vocabulary (docs/algorithm.md
section 2), small hand-made vocabularies and exhaustive inputs.
"""
from __future__ import annotations

import base64
import itertools
from pathlib import Path
from typing import Iterable, Iterator, Sequence

Ranks = dict  # dict[bytes, int]


# --------------------------------------------------------------------------- the merge rule
def bpe_trace(piece: bytes, ranks: Ranks) -> tuple[list[bytes], list[int]]:
    """BPE of `piece` as (parts, ranks of the merges performed, in order)."""
    parts = [piece[i : i + 1] for i in range(len(piece))]
    merges: list[int] = []
    while len(parts) > 1:
        best_rank = None
        best_index = -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best_rank is None or rank < best_rank):  # strict: leftmost wins ties
                best_rank = rank
                best_index = i
        if best_rank is None:
            break
        parts[best_index : best_index + 2] = [parts[best_index] + parts[best_index + 1]]
        merges.append(best_rank)
    return parts, merges


def bpe_parts(piece: bytes, ranks: Ranks) -> list[bytes]:
    """The parts (token bytes) of the plain BPE of `piece`, without the whole-piece shortcut."""
    return bpe_trace(piece, ranks)[0]


def bpe(piece: bytes, ranks: Ranks) -> list[int]:
    """The token ids of the plain BPE of `piece` (KeyError if some single byte has no rank)."""
    return [ranks[part] for part in bpe_parts(piece, ranks)]


def encode_piece(piece: bytes, ranks: Ranks, *, shortcut: bool = True) -> list[int]:
    """tiktoken's per-piece encoding: the whole-piece shortcut (if enabled), else plain BPE."""
    if shortcut and piece in ranks:
        return [ranks[piece]]
    return bpe(piece, ranks)


def encode_pieces(pieces: Iterable[bytes], ranks: Ranks, *, shortcut: bool = True) -> list[int]:
    """Each piece encoded on its own, ids concatenated (empty pieces contribute nothing)."""
    out: list[int] = []
    for piece in pieces:
        if piece:
            out.extend(encode_piece(piece, ranks, shortcut=shortcut))
    return out


def prefix_last_tokens(data: bytes, ranks: Ranks) -> list[int]:
    """For every i in 1..len(data): the last id of the plain BPE of data[:i]."""
    return [bpe(data[:i], ranks)[-1] for i in range(1, len(data) + 1)]


def encode_with_pattern(text: str, ranks: Ranks, pat_str: str) -> list[int]:
    """encode_ordinary semantics: split with the `regex` pattern, encode each piece (shortcut on)."""
    import regex

    return encode_pieces((m.group().encode("utf-8") for m in regex.finditer(pat_str, text)), ranks)


# --------------------------------------------------------------------------- vocabulary classes
def classify(ranks: Ranks) -> tuple[set[bytes], set[bytes]]:
    """(non-canonical tokens, improper tokens) of a vocabulary, as docs/algorithm.md section 2
    defines them.

    A token z with |z| >= 2 is canonical when its own plain BPE is the single part [z];
    a canonical token is proper when the ranks of the merges performed while tokenizing it
    alone never go down (the last merge is z's own, so every merge building pre(z) and
    suc(z) comes first).
    """
    noncanonical: set[bytes] = set()
    improper: set[bytes] = set()
    for token in ranks:
        if len(token) < 2:
            continue
        parts, merges = bpe_trace(token, ranks)
        if parts != [token]:
            noncanonical.add(token)
        elif any(a > b for a, b in zip(merges, merges[1:])):
            improper.add(token)
    return noncanonical, improper


def watched_tokens(ranks: Ranks) -> set[bytes]:
    """The tokens csrc/properize.c cannot give priorities to, stated independently of it.

    The level of a canonical token is the highest rank among the merges that make it;
    a member of level L is a canonical token of rank below L; it grows from its part of
    level L (its parent) and absorbs the other part on one side.  A level is ordered
    when no member has both parts of level L, none absorbs the seed's left part on the
    right, and these constraints have no cycle: parent before child; children of one
    part growing on different sides in rank order; a member absorbing w on the right
    before every member of the level absorbing w on the left.  The members of the
    other levels are watched.  (properize.c's check after the build watches no more.)
    """
    rule: dict[bytes, tuple[bytes, bytes]] = {}  # canonical token -> (pre, suc)
    for token in ranks:
        merge = last_merge(token, ranks) if len(token) >= 2 else None
        if merge is not None:
            rule[token] = merge
    level = {t: -1 for t in ranks if len(t) == 1}
    for token in sorted(rule, key=len):
        left, right = rule[token]
        level[token] = max(ranks[token], level[left], level[right])
    by_level: dict[int, list[bytes]] = {}
    for token in rule:
        if level[token] > ranks[token]:
            by_level.setdefault(level[token], []).append(token)
    watched: set[bytes] = set()
    rank_to_token = {r: t for t, r in ranks.items()}
    for high, members in by_level.items():
        seed = rank_to_token[high]
        side, parent, absorbed = {}, {}, {}
        ordered = True
        for z in members:
            left, right = rule[z]
            if level[left] == high and level[right] == high:
                ordered = False
            elif level[right] == high:
                side[z], parent[z], absorbed[z] = "left", right, left
            else:
                side[z], parent[z], absorbed[z] = "right", left, right
                ordered &= right != rule[seed][0]
        if ordered:
            before = {z: set() for z in members}  # z -> what must come before z
            for z in members:
                if parent[z] in before:
                    before[z].add(parent[z])
                for y in members:
                    if y == z:
                        continue
                    if parent[y] == parent[z] and side[y] != side[z] and ranks[y] < ranks[z]:
                        before[z].add(y)
                    if absorbed[y] == absorbed[z] and side[y] == "right" and side[z] == "left":
                        before[z].add(y)
            done: set[bytes] = set()
            while len(done) < len(members):
                ready = [z for z in members if z not in done and before[z] <= done]
                if not ready:
                    ordered = False
                    break
                done.update(ready)
        if not ordered:
            watched.update(members)
    return watched


def last_merge(token: bytes, ranks: Ranks) -> tuple[bytes, bytes] | None:
    """The two parts that tiktoken's merge rule joins last on `token` alone, if it ends as
    the one part `token` (a canonical token), else None."""
    parts = [token[i : i + 1] for i in range(len(token))]
    last = None
    while len(parts) > 1:
        best, at = None, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best is None or rank < best):
                best, at = rank, i
        if best is None:
            break
        last = (parts[at], parts[at + 1])
        parts[at : at + 2] = [parts[at] + parts[at + 1]]
    return last if len(parts) == 1 else None


def is_proper(ranks: Ranks) -> bool:
    """True when every canonical token of the vocabulary is proper (the incremental step applies)."""
    return not classify(ranks)[1]


# --------------------------------------------------------------------------- building vocabularies
def small_vocab(tokens: Sequence[bytes | str], *, first_rank: int = 256, byte_rank_base: int = 0) -> Ranks:
    """All 256 single bytes (rank byte_rank_base + b) plus `tokens` in rank order from `first_rank`.

    The core needs every single byte; the multi-byte tokens' order is their merge priority.
    """
    ranks: Ranks = {bytes([b]): byte_rank_base + b for b in range(256)}
    for i, token in enumerate(tokens):
        if isinstance(token, str):
            token = token.encode("utf-8")
        assert token not in ranks, f"duplicate token {token!r}"
        ranks[token] = first_rank + i
    return ranks


def all_strings(alphabet: str, max_len: int, min_len: int = 1) -> Iterator[str]:
    """Every string over `alphabet` with length in [min_len, max_len], shortest first."""
    for n in range(min_len, max_len + 1):
        for chars in itertools.product(alphabet, repeat=n):
            yield "".join(chars)


def load_tiktoken_ranks(path: str | Path) -> Ranks:
    """Parses a .tiktoken rank file (`base64(token) rank` per line), independently of tiktoken."""
    ranks: Ranks = {}
    for line in Path(path).read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def split_ids_by_pieces(ids: Sequence[int], pieces: Sequence[bytes], token_len) -> list[list[int]]:
    """Cuts a concatenated per-piece encoding back into one id list per piece.

    `token_len(id)` gives a token's byte length; tokens never cross piece ends, so the ids
    are consumed until their lengths add up to each piece's length.  Raises AssertionError
    if some token would straddle a piece end (itself a bug worth reporting).
    """
    out: list[list[int]] = []
    k = 0
    for piece in pieces:
        need = len(piece)
        mine: list[int] = []
        while need > 0:
            assert k < len(ids), "ran out of ids before the end of the pieces"
            need -= token_len(ids[k])
            mine.append(ids[k])
            k += 1
        assert need == 0, f"a token straddles the end of piece {piece!r}"
        out.append(mine)
    assert k == len(ids), "ids left over after the last piece"
    return out
