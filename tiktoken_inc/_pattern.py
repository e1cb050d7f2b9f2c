"""Compiles a pre-split pattern (`pat_str`) into a program for the C pre-tokenizer.

tiktoken splits text with its pattern through a backtracking regex engine (Rust's
fancy-regex): at each position the match is the first one the engine finds, trying the
alternatives in order, greedy quantifiers longest first, lazy ones shortest first, and never
giving back what a possessive quantifier took.  This module reads the pattern (Rust's regex
syntax), turns it into an automaton that finds that same match in one forward scan, and
packs the automaton for csrc/pattern.c, which splits text with it in time linear in the text.

The automaton reads *atoms*: classes of characters the pattern cannot tell apart (every
character set in the pattern is a union of atoms).  It is a deterministic automaton over
ordered lists of backtracking threads (a thread earlier in the list is one the engine tries
first); reading the character at a position also decides whether a match ends just before
it, which is how one-character lookaheads (`\\s+(?!\\S)`, and possessive quantifiers written
as "as many as there are") and `$` are decided.  The sets of Unicode properties are
tiktoken's own (tiktoken_inc/_unicode_properties.py).

What is refused (UnsupportedPattern, with the reason; the caller then splits with `regex`):
look-behind, look-ahead longer than one character, `^`, `\\b`, back-references, case-
insensitive matching of anything but ASCII literals, possessive or atomic groups around more
than one quantified character class, a pattern that can match the empty string or leaves some
character unmatched, and a pattern whose scan could run ahead of its matches without bound
(the split would no longer be linear).

```
>>> program = compile_pattern(r"[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
>>> program[:4]
b'TKIP'
```
"""
from __future__ import annotations

import bisect
import functools
import struct
from typing import Dict, List, Optional, Sequence, Tuple

LIMIT = 0x110000
SURROGATES = (0xD800, 0xE000)
#: What an invalid UTF-8 byte is taken as: a noncharacter, unassigned in every Unicode
#: version (so, like tiktoken's built-in splitters, a character of no class).
INVALID_STAND_IN = 0xFDD0
MAX_STATES = 4096
MAX_ATOMS = 255
MAX_NFA_NODES = 20000
MAX_REPEAT = 256
MAX_LOOPS = 64  # states that repeat themselves on a character (pattern.c keeps a run for each)
PROGRAM_MAGIC = b"TKIP"
PROGRAM_VERSION = 1
MATCHED = 0x8000


class UnsupportedPattern(ValueError):
    """A pattern outside what the C pre-tokenizer compiles; the message says why."""


# ---------------------------------------------------------------- character sets
# A set of code points is a tuple of boundaries b0 < b1 < ...: it holds [b0, b1), [b2, b3), ...

CharSet = Tuple[int, ...]
EMPTY: CharSet = ()
ANY: CharSet = (0, LIMIT)


def _combine(a: CharSet, b: CharSet, keep) -> CharSet:
    """The set of code points x with keep(x in a, x in b)."""
    points = sorted(set(a) | set(b))
    out: list[int] = []
    inside = False
    for point in points:
        now = keep(bisect.bisect_right(a, point) & 1 == 1, bisect.bisect_right(b, point) & 1 == 1)
        if now != inside:
            out.append(point)
            inside = now
    return tuple(out)


def union(a: CharSet, b: CharSet) -> CharSet:
    return _combine(a, b, lambda x, y: x or y)


def intersection(a: CharSet, b: CharSet) -> CharSet:
    return _combine(a, b, lambda x, y: x and y)


def difference(a: CharSet, b: CharSet) -> CharSet:
    return _combine(a, b, lambda x, y: x and not y)


def symmetric_difference(a: CharSet, b: CharSet) -> CharSet:
    return _combine(a, b, lambda x, y: x != y)


def complement(a: CharSet) -> CharSet:
    return difference(ANY, a)


def char_range(first: int, last: int) -> CharSet:
    return (first, last + 1)


def contains(a: CharSet, code_point: int) -> bool:
    return bisect.bisect_right(a, code_point) & 1 == 1


@functools.lru_cache(maxsize=None)
def _property_set(index: int) -> CharSet:
    from tiktoken_inc import _unicode_properties as data

    return tuple(int(b, 16) for b in data.SETS[index].split())


def _normalize(name: str) -> str:
    return "".join(c for c in name if c not in " _-").upper()


def property_set(name: str) -> CharSet:
    """The characters of \\p{name} as tiktoken sees them (gc=, sc= forms included)."""
    from tiktoken_inc import _unicode_properties as data

    key, _, value = name.replace(":", "=").partition("=")
    if value:
        tables = {"GC": data.GENERAL_CATEGORY, "GENERALCATEGORY": data.GENERAL_CATEGORY,
                  "SC": data.SCRIPT, "SCRIPT": data.SCRIPT}
        table = tables.get(_normalize(key))
        if table is None:
            raise UnsupportedPattern(f"the property {key!r} (in \\p{{{name}}}) is not supported")
        index = table.get(_normalize(value))
    else:
        index = data.BARE.get(_normalize(name))
    if index is None:
        raise UnsupportedPattern(f"the Unicode property \\p{{{name}}} is not supported")
    return _property_set(index)


def _perl_set(letter: str) -> CharSet:
    from tiktoken_inc import _unicode_properties as data

    return _property_set(data.PERL[letter])


# ---------------------------------------------------------------- parsing
# Syntax tree: ("set", CharSet) | ("cat", [node]) | ("alt", [node]) | ("empty",)
#   | ("rep", node, lo, hi or None, greedy) | ("atomic", node)
#   | ("look", CharSet, at_end): zero width; the next character is in the set, or (at_end)
#     the text ends here.
Node = tuple

_ESCAPED_CHARS = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B, "a": 0x07, "e": 0x1B}


class _Parser:
    """Recursive descent over Rust regex syntax (the subset above)."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.ignore_case = False
        self.multi_line = False
        self.dot_all = False
        #: Each bracketed class and class escape read, as (its source, its set); the source
        #: starts with "(?i)" where it was read case-insensitively.
        self.classes: list[tuple[str, CharSet]] = []

    def fail(self, why: str) -> UnsupportedPattern:
        return UnsupportedPattern(f"{why} (at offset {self.pos} of the pattern)")

    def peek(self, ahead: int = 0) -> str:
        at = self.pos + ahead
        return self.text[at] if at < len(self.text) else ""

    def parse(self) -> Node:
        node = self.alternation()
        if self.pos != len(self.text):
            raise self.fail("unbalanced ')'")
        return node

    def alternation(self) -> Node:
        branches = [self.concatenation()]
        while self.peek() == "|":
            self.pos += 1
            branches.append(self.concatenation())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def concatenation(self) -> Node:
        items: list[Node] = []
        while self.peek() not in ("", "|", ")"):
            atom = self.atom()
            if atom is not None:
                items.append(self.quantified(atom))
        return items[0] if len(items) == 1 else ("cat", items) if items else ("empty",)

    def quantified(self, atom: Node) -> Node:
        c = self.peek()
        if c == "?":
            lo, hi = 0, 1
        elif c == "*":
            lo, hi = 0, None
        elif c == "+":
            lo, hi = 1, None
        elif c == "{":
            lo, hi = self.repeat_bounds()
        else:
            return atom
        if atom[0] == "look":
            raise self.fail("a quantifier after an assertion")
        if c != "{":
            self.pos += 1
        greedy = True
        if self.peek() == "?":
            greedy = False
            self.pos += 1
        node: Node = ("rep", atom, lo, hi, greedy)
        if self.peek() == "+":
            self.pos += 1
            node = ("atomic", node)
        if self.peek() in ("?", "*", "+", "{"):
            raise self.fail("a quantifier after a quantifier")
        return node

    def repeat_bounds(self) -> tuple[int, Optional[int]]:
        close = self.text.find("}", self.pos)
        body = self.text[self.pos + 1 : close] if close > 0 else ""
        parts = body.split(",")
        if close < 0 or len(parts) > 2 or not all(p.isdigit() or p == "" for p in parts) or (
            len(parts) == 1 and not parts[0]
        ):
            raise self.fail("a '{' that is not a repetition")
        lo = int(parts[0]) if parts[0] else 0
        hi: Optional[int] = lo if len(parts) == 1 else (int(parts[1]) if parts[1] else None)
        if (hi is not None and hi < lo) or lo > MAX_REPEAT or (hi is not None and hi > MAX_REPEAT):
            raise self.fail(f"the repetition {{{body}}}")
        self.pos = close + 1
        return lo, hi

    def atom(self) -> Optional[Node]:
        c = self.peek()
        if c == "(":
            return self.group()
        if c == "[":
            start = self.pos
            found = self.char_class()
            self.classes.append(("(?i)" * self.ignore_case + self.text[start : self.pos], found))
            return ("set", found)
        if c == ".":
            self.pos += 1
            return ("set", ANY if self.dot_all else complement(char_range(10, 10)))
        if c == "$":
            self.pos += 1
            return ("look", char_range(10, 10) if self.multi_line else EMPTY, True)
        if c == "^":
            raise self.fail("'^' (start of text or line)")
        if c in ("*", "+", "?"):
            raise self.fail("a quantifier with nothing to repeat")
        if c == "\\":
            return self.escape_atom()
        self.pos += 1
        return ("set", self.literal(ord(c)))

    def literal(self, code_point: int) -> CharSet:
        """One character, case-folded under (?i) (ASCII letters only)."""
        if not self.ignore_case or code_point < 0x80 and not chr(code_point).isalpha():
            return char_range(code_point, code_point)
        if code_point >= 0x80:
            raise self.fail("case-insensitive matching of a non-ASCII character")
        from tiktoken_inc import _unicode_properties as data

        out: CharSet = EMPTY
        for c in data.CASE_ORBITS[chr(code_point)]:
            out = union(out, char_range(ord(c), ord(c)))
        return out

    def group(self) -> Optional[Node]:
        self.pos += 1  # "("
        saved = (self.ignore_case, self.multi_line, self.dot_all)
        kind = "group"
        if self.peek() == "?":
            self.pos += 1
            c = self.peek()
            if c == ":":
                self.pos += 1
            elif c in ("=", "!"):
                self.pos += 1
                kind = "ahead" if c == "=" else "not ahead"
            elif c == ">":
                self.pos += 1
                kind = "atomic"
            elif c == "#":
                close = self.text.find(")", self.pos)
                if close < 0:
                    raise self.fail("an unclosed comment")
                self.pos = close + 1
                return None
            elif c == "P" and self.peek(1) == "<" or c == "<" and self.peek(1) not in ("=", "!"):
                close = self.text.find(">", self.pos)
                if close < 0:
                    raise self.fail("an unclosed group name")
                self.pos = close + 1
            elif c == "<":
                raise self.fail("a look-behind")
            else:
                if self.flags():  # "(?flags)": the rest of the enclosing group
                    return None
        node = self.alternation()
        if self.peek() != ")":
            raise self.fail("an unclosed group")
        self.pos += 1
        self.ignore_case, self.multi_line, self.dot_all = saved
        if kind == "atomic":
            return ("atomic", node)
        if kind in ("ahead", "not ahead"):
            return self.lookahead(node, kind == "ahead")
        return node

    def flags(self) -> bool:
        """Reads "flags)" (True: they hold to the end of the group) or "flags:" (False)."""
        on = True
        while True:
            c = self.peek()
            self.pos += 1
            if c == "-":
                on = False
            elif c == "i":
                self.ignore_case = on
            elif c == "m":
                self.multi_line = on
            elif c == "s":
                self.dot_all = on
            elif c == "u":
                pass
            elif c == ")":
                return True
            elif c == ":":
                return False
            else:
                self.pos -= 1
                raise self.fail(f"the flag {c!r}")

    def lookahead(self, node: Node, positive: bool) -> Node:
        if node[0] == "set":
            return ("look", node[1], False) if positive else ("look", complement(node[1]), True)
        if node[0] == "look" and node[1] == EMPTY and node[2]:  # (?=$), (?!$)
            return node if positive else ("look", ANY, False)
        raise self.fail("a look-ahead longer than one character")

    def escape_atom(self) -> Node:
        c = self.peek(1)
        if c == "z":
            self.pos += 2
            return ("look", EMPTY, True)
        if c in ("A", "b", "B", "Z", "G", "K", "k", "h", "H", "R", "X") or c.isdigit():
            raise self.fail(f"the escape \\{c}")
        start = self.pos
        found = self.escape(in_class=False)
        if c in "dswDSWpP":
            self.classes.append(("(?i)" * self.ignore_case + self.text[start : self.pos], found))
        return ("set", found)

    def escape(self, in_class: bool) -> CharSet:
        """The set of a backslash escape (a character or a class) at pos."""
        self.pos += 1
        c = self.peek()
        self.pos += 1
        if c in ("d", "s", "w", "D", "S", "W"):
            if self.ignore_case and c.lower() == "w":
                raise self.fail("case-insensitive \\w")
            found = _perl_set(c.lower())
            return complement(found) if c.isupper() else found
        if c in ("p", "P"):
            if self.ignore_case:
                raise self.fail("a case-insensitive Unicode property")
            negated = c == "P"
            if self.peek() == "{":
                close = self.text.find("}", self.pos)
                if close < 0:
                    raise self.fail("an unclosed \\p{")
                name = self.text[self.pos + 1 : close]
                self.pos = close + 1
            else:
                name = self.peek()
                self.pos += 1
            if name.startswith("^"):
                negated, name = not negated, name[1:]
            found = property_set(name)
            return complement(found) if negated else found
        if c in _ESCAPED_CHARS:
            return self.literal(_ESCAPED_CHARS[c])
        if c in ("x", "u", "U"):
            return self.literal(self.hex_escape(c))
        if c and c.isascii() and not c.isalnum():
            return self.literal(ord(c))
        raise self.fail(f"the escape \\{c}")

    def hex_escape(self, kind: str) -> int:
        if self.peek() == "{":
            close = self.text.find("}", self.pos)
            digits = self.text[self.pos + 1 : close] if close > 0 else ""
            self.pos = close + 1
        else:
            width = {"x": 2, "u": 4, "U": 8}[kind]
            digits = self.text[self.pos : self.pos + width]
            self.pos += width
            if len(digits) != width:
                digits = ""
        try:
            value = int(digits, 16)
        except ValueError:
            raise self.fail("a malformed hexadecimal escape") from None
        if value >= LIMIT or SURROGATES[0] <= value < SURROGATES[1]:
            raise self.fail("a hexadecimal escape that is no character")
        return value

    def char_class(self) -> CharSet:
        """A bracketed class at pos: union within, then &&, -- and ~~ left to right."""
        self.pos += 1  # "["
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        result = self.class_union(first=True)
        while True:
            op = self.text[self.pos : self.pos + 2]
            if op in ("&&", "--", "~~"):
                self.pos += 2
                right = self.class_union(first=False)
                result = {"&&": intersection, "--": difference, "~~": symmetric_difference}[op](result, right)
            elif self.peek() == "]":
                self.pos += 1
                break
            else:
                raise self.fail("an unclosed character class")
        return complement(result) if negated else result

    def class_union(self, first: bool) -> CharSet:
        out: CharSet = EMPTY
        while True:
            c = self.peek()
            if c == "" or self.text[self.pos : self.pos + 2] in ("&&", "--", "~~"):
                return out
            if c == "]" and not first:
                return out
            first = False
            if c == "[":
                if self.peek(1) == ":":
                    raise self.fail("a POSIX class")
                out = union(out, self.char_class())
                continue
            low = self.class_char()
            if isinstance(low, tuple):  # a class escape (\p, \d, ...)
                out = union(out, low)
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", "-", ""):
                self.pos += 1
                high = self.class_char()
                if isinstance(high, tuple) or high < low:
                    raise self.fail("a malformed range in a character class")
                if self.ignore_case and (low < 0x80 <= high or high >= 0x80 and low < 0x80):
                    raise self.fail("a case-insensitive range beyond ASCII")
                if self.ignore_case:
                    for code_point in range(low, high + 1):
                        out = union(out, self.literal(code_point))
                else:
                    out = union(out, char_range(low, high))
                continue
            out = union(out, self.literal(low))

    def class_char(self):
        """A character in a class (its code point), or the set of a class escape."""
        c = self.peek()
        if c == "\\":
            d = self.peek(1)
            if d in "dswDSWpP":
                return self.escape(in_class=True)
            if d in _ESCAPED_CHARS:
                self.pos += 2
                return _ESCAPED_CHARS[d]
            if d in ("x", "u", "U"):
                self.pos += 2
                return self.hex_escape(d)
            if d and d.isascii() and not d.isalnum():
                self.pos += 2
                return ord(d)
            raise self.fail(f"the escape \\{d} in a character class")
        self.pos += 1
        return ord(c)


# ---------------------------------------------------------------- automaton


class _Nfa:
    """Thompson-style automaton with ordered splits (earlier = tried first by the engine)."""

    CHAR, SPLIT, LOOK, MATCH = range(4)

    def __init__(self) -> None:
        self.kind: list[int] = []
        self.charset: list[int] = []  # CHAR, LOOK: index into sets
        self.at_end: list[bool] = []  # LOOK: also passes at the end of the text
        self.out: list = []  # CHAR, LOOK: next node; SPLIT: list of next nodes
        self.sets: list[CharSet] = []
        self._set_index: dict[CharSet, int] = {}

    def node(self, kind: int, charset: CharSet = EMPTY, out=None, at_end: bool = False) -> int:
        if len(self.kind) >= MAX_NFA_NODES:
            raise UnsupportedPattern("the pattern is too large to compile")
        index = self._set_index.setdefault(charset, len(self.sets))
        if index == len(self.sets):
            self.sets.append(charset)
        self.kind.append(kind)
        self.charset.append(index)
        self.at_end.append(at_end)
        self.out.append(out)
        return len(self.kind) - 1

    def build(self, node: Node, out: int) -> int:
        """The entry of a fragment for `node` that continues at `out`."""
        tag = node[0]
        if tag == "set":
            return self.node(self.CHAR, node[1], out)
        if tag == "look":
            return self.node(self.LOOK, node[1], out, at_end=node[2])
        if tag == "empty":
            return out
        if tag == "cat":
            for item in reversed(node[1]):
                out = self.build(item, out)
            return out
        if tag == "alt":
            return self.node(self.SPLIT, out=[self.build(branch, out) for branch in node[1]])
        if tag == "rep":
            return self.repeat(node, out)
        if tag == "atomic":
            return self.atomic(node[1], out)
        raise AssertionError(tag)

    def repeat(self, node: Node, out: int) -> int:
        _, body, lo, hi, greedy = node
        if (hi is None or hi > 1) and _nullable(body):
            raise UnsupportedPattern("a repetition of something that can match the empty string")
        if hi is None:
            loop = self.node(self.SPLIT, out=[])
            again = self.build(body, loop)
            self.out[loop] = [again, out] if greedy else [out, again]
            entry = loop
        else:
            entry = out
            for _ in range(hi - lo):
                again = self.build(body, entry)
                entry = self.node(self.SPLIT, out=[again, out] if greedy else [out, again])
        for _ in range(lo):
            entry = self.build(body, entry)
        return entry

    def atomic(self, body: Node, out: int) -> int:
        """An atomic group (or possessive quantifier) around a single character class, or a
        repetition of one: as many characters of the class as there are, up to the bound
        (for a single class: one character)."""
        while body[0] == "cat" and len(body[1]) == 1:
            body = body[1][0]
        if body[0] in ("set", "look", "empty"):
            return self.build(body, out)
        if body[0] == "rep" and body[1][0] == "set":
            _, item, lo, hi, greedy = body
            charset = item[1]
            if not greedy:
                return self.build(("cat", [item] * lo), out)
            stop = self.node(self.LOOK, complement(charset), out, at_end=True)
            if hi is None:
                loop = self.node(self.SPLIT, out=[])
                self.out[loop] = [self.node(self.CHAR, charset, loop), stop]
                entry = loop
            else:
                entry = out
                for _ in range(hi - lo):
                    entry = self.node(self.SPLIT, out=[self.node(self.CHAR, charset, entry), stop])
            for _ in range(lo):
                entry = self.node(self.CHAR, charset, entry)
            return entry
        raise UnsupportedPattern("an atomic group or possessive quantifier around more than one character class")


def _nullable(node: Node) -> bool:
    tag = node[0]
    if tag == "set":
        return False
    if tag in ("look", "empty"):
        return True
    if tag == "cat":
        return all(_nullable(item) for item in node[1])
    if tag == "alt":
        return any(_nullable(branch) for branch in node[1])
    if tag == "rep":
        return node[2] == 0 or _nullable(node[1])
    if tag == "atomic":
        return _nullable(node[1])
    raise AssertionError(tag)


def _atoms(sets: Sequence[CharSet]) -> tuple[list[int], list[int], list[int]]:
    """The atoms of these sets: (interval starts, the atom of each interval, the atom mask of
    each set).  Atoms are numbered in order of first appearance (ASCII first)."""
    points = sorted({0, LIMIT, INVALID_STAND_IN, INVALID_STAND_IN + 1, *SURROGATES}.union(*sets))
    points = [p for p in points if p < LIMIT]
    signatures: dict[tuple[bool, ...], int] = {}
    starts: list[int] = []
    atoms: list[int] = []
    for point in points:
        signature = tuple(bisect.bisect_right(s, point) & 1 == 1 for s in sets)
        atom = signatures.setdefault(signature, len(signatures))
        if atoms and atoms[-1] == atom:
            continue
        starts.append(point)
        atoms.append(atom)
    masks = [0] * len(sets)
    for signature, atom in signatures.items():
        for i, inside in enumerate(signature):
            if inside:
                masks[i] |= 1 << atom
    if len(signatures) > MAX_ATOMS:
        raise UnsupportedPattern(f"the pattern tells apart more than {MAX_ATOMS} kinds of characters")
    return starts, atoms, masks


class _Dfa:
    """The deterministic automaton over thread lists, and the checks the C matcher relies on."""

    def __init__(self, nfa: _Nfa, entry: int, masks: list[int], atom_count: int):
        self.nfa = nfa
        self.masks = masks
        self.atom_count = atom_count
        self.end = atom_count  # the lookahead symbol "end of text"
        start = (entry,)
        ids: dict[tuple[int, ...], int] = {(): 0, start: 1}
        order = [(), start]
        self.transition: list[list[int]] = []
        self.accept_at_end: list[bool] = []
        i = 0
        while i < len(order):
            threads = order[i]
            row = []
            for atom in range(atom_count):
                chars, matched = self.closure(threads, atom)
                successors: list[int] = []
                for char in chars:
                    if masks[nfa.charset[char]] >> atom & 1 and nfa.out[char] not in successors:
                        successors.append(nfa.out[char])
                target = tuple(successors)
                if target not in ids:
                    if len(order) >= 8 * MAX_STATES:
                        raise UnsupportedPattern("the pattern's automaton is too large")
                    ids[target] = len(order)
                    order.append(target)
                row.append(ids[target] | (MATCHED if matched else 0))
            self.transition.append(row)
            self.accept_at_end.append(self.closure(threads, self.end)[1])
            i += 1

    def closure(self, threads: Sequence[int], lookahead: int) -> tuple[list[int], bool]:
        """The CHAR nodes the threads reach without reading, in the engine's order, and
        whether a match ends here (the threads after it are then dropped)."""
        nfa = self.nfa
        chars: list[int] = []
        seen: set[int] = set()
        stack = list(reversed(threads))
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            kind = nfa.kind[node]
            if kind == _Nfa.CHAR:
                chars.append(node)
            elif kind == _Nfa.SPLIT:
                stack.extend(reversed(nfa.out[node]))
            elif kind == _Nfa.LOOK:
                passes = nfa.at_end[node] if lookahead == self.end else bool(
                    self.masks[nfa.charset[node]] >> lookahead & 1)
                if passes:
                    stack.append(nfa.out[node])
            else:
                return chars, True
        return chars, False


def _minimize(transition: list[list[int]], accept_at_end: list[bool]) -> tuple[list[list[int]], list[bool]]:
    """Merges states that behave alike (Moore's refinement); the dead state stays 0, the start 1."""
    count = len(transition)
    block = [0] * count
    signature_ids: dict = {}
    for s in range(count):
        key = (accept_at_end[s], tuple(t & MATCHED for t in transition[s]))
        block[s] = signature_ids.setdefault(key, len(signature_ids))
    while True:
        signature_ids = {}
        refined = [0] * count
        for s in range(count):
            key = (block[s], tuple(block[t & ~MATCHED] for t in transition[s]))
            refined[s] = signature_ids.setdefault(key, len(signature_ids))
        if len(signature_ids) == len(set(block)):
            break
        block = refined
    # Renumber: dead (the block of state 0) first, start second, the rest in order.
    number: dict[int, int] = {block[0]: 0}
    number.setdefault(block[1], 1)
    for s in range(count):
        number.setdefault(block[s], len(number))
    size = len(number)
    new_transition: list[list[int]] = [[] for _ in range(size)]
    new_accept = [False] * size
    for s in range(count):
        n = number[block[s]]
        new_transition[n] = [number[block[t & ~MATCHED]] | (t & MATCHED) for t in transition[s]]
        new_accept[n] = accept_at_end[s]
    return new_transition, new_accept


def _check(transition: list[list[int]], accept_at_end: list[bool], live_atoms: list[int]) -> None:
    """What the C matcher relies on (pattern.c checks it again when it loads a program):
    no empty match; a match from every position whatever follows (tiktoken drops text
    between matches: such a pattern is left to `regex`); and a scan that runs on past its
    best match only through states that repeat themselves on a character (the matcher skips
    such runs once it knows their end), so that a split takes time linear in the text."""
    if accept_at_end[1] or any(t & MATCHED for t in transition[1]):
        raise UnsupportedPattern("the pattern can match the empty string")
    count = len(transition)
    pending = [False] * count  # reached from the start without a match yet
    stack = [1]
    while stack:
        s = stack.pop()
        if pending[s]:
            continue
        pending[s] = True
        for atom in live_atoms:
            t = transition[s][atom]
            if t & MATCHED:
                continue
            if t == 0 or s != 1 and not accept_at_end[s]:
                raise UnsupportedPattern(
                    "the pattern does not match at every position (tiktoken would drop the text "
                    "between its matches)")
            stack.append(t)
    for s in range(2, count):
        if pending[s] and not accept_at_end[s]:
            raise UnsupportedPattern(
                "the pattern does not match at every position (tiktoken would drop the text "
                "between its matches)")
    after_match = [False] * count
    stack = [t & ~MATCHED for row in transition for t in row if t & MATCHED]
    while stack:
        s = stack.pop()
        if s and not after_match[s]:
            after_match[s] = True
            stack.extend(t & ~MATCHED for t in transition[s])
    colour = [0] * count  # 0 new, 1 on the path, 2 done
    for root in range(count):
        if not after_match[root] or colour[root]:
            continue
        path = [(root, iter(transition[root]))]
        colour[root] = 1
        while path:
            s, edges = path[-1]
            for t in edges:
                if t & MATCHED or t == 0 or t == s:
                    continue
                if colour[t] == 1:
                    raise UnsupportedPattern(
                        "the pattern can scan without bound past its match (a split could take "
                        "quadratic time)")
                if colour[t] == 0:
                    colour[t] = 1
                    path.append((t, iter(transition[t])))
                    break
            else:
                colour[s] = 2
                path.pop()


def _representatives(starts: list[int], atoms: list[int], atom_count: int) -> list[int]:
    """For each atom its smallest character (surrogates are none), or 0xFFFFFFFF."""
    found = [0xFFFFFFFF] * atom_count
    for k, (start, atom) in enumerate(zip(starts, atoms)):
        end = starts[k + 1] if k + 1 < len(starts) else LIMIT
        if found[atom] != 0xFFFFFFFF or SURROGATES[0] <= start and end <= SURROGATES[1]:
            continue
        found[atom] = start
    return found


@functools.lru_cache(maxsize=64)
def compile_pattern(pat_str: str) -> bytes:
    """The program for csrc/pattern.c that splits text as tiktoken splits it with `pat_str`;
    UnsupportedPattern (a ValueError) with the reason for a pattern outside the subset."""
    return _compile_tree(_Parser(pat_str).parse())


def _anchored_at_end(branch: Node) -> bool:
    """Whether every match of `branch` ends at the end of the text (it ends with `$`)."""
    last = branch[1][-1] if branch[0] == "cat" else branch
    return last[0] == "look" and last[1] == EMPTY and last[2]


@functools.lru_cache(maxsize=8)
def compile_body(pat_str: str) -> bytes:
    """The program of `pat_str` without its top-level alternatives that end with `$` (such as
    `\\s++$`).  At every position it matches what `pat_str` matches unless that match
    reaches the end of the text: the alternatives are tried in order, and one that ends with
    `$` matches only there.

    ```
    >>> same_split(compile_body(r"\\S+|\\s++$|\\s"), compile_pattern(r"\\S+|\\s"))
    True
    ```
    """
    tree = _Parser(pat_str).parse()
    if tree[0] == "alt":
        kept = [branch for branch in tree[1] if not _anchored_at_end(branch)]
        tree = ("alt", kept) if len(kept) > 1 else kept[0]
    return _compile_tree(tree)


def _compile_tree(tree: Node) -> bytes:
    nfa = _Nfa()
    match = nfa.node(_Nfa.MATCH)
    entry = nfa.build(tree, match)
    starts, atoms, masks = _atoms(nfa.sets)
    atom_count = max(atoms) + 1
    dfa = _Dfa(nfa, entry, masks, atom_count)
    transition, accept_at_end = _minimize(dfa.transition, dfa.accept_at_end)
    loops = sum(1 for s, row in enumerate(transition) if s and s in row)
    if len(transition) > MAX_STATES or loops > MAX_LOOPS:
        raise UnsupportedPattern("the pattern's automaton is too large")
    representatives = _representatives(starts, atoms, atom_count)
    live_atoms = [a for a in range(atom_count) if representatives[a] != 0xFFFFFFFF]
    _check(transition, accept_at_end, live_atoms)
    invalid_atom = atoms[bisect.bisect_right(starts, INVALID_STAND_IN) - 1]
    header = struct.pack("<4s6I", PROGRAM_MAGIC, PROGRAM_VERSION, atom_count, len(transition),
                         len(starts), invalid_atom, 0)
    body = [
        struct.pack(f"<{len(starts)}I", *starts),
        bytes(atoms),
        struct.pack(f"<{len(transition) * atom_count}H", *(t for row in transition for t in row)),
        bytes(accept_at_end),
        struct.pack(f"<{atom_count}I", *representatives),
    ]
    return header + b"".join(body)


def pattern_classes(pat_str: str) -> list[tuple[str, CharSet]]:
    """The bracketed classes and class escapes of a pattern, each as (source, set) (for tests).

    ```
    >>> [source for source, _ in pattern_classes("[ab]+|[^c]")]
    ['[ab]', '[^c]']
    ```"""
    parser = _Parser(pat_str)
    parser.parse()
    return parser.classes


def describe(program: bytes) -> Dict[str, int]:
    """The sizes of a program: atoms, states, intervals.

    ```
    >>> describe(compile_pattern(r"\\S+|\\s+"))["atoms"]
    2
    ```
    """
    _, _, atoms, states, intervals, _, _ = struct.unpack_from("<4s6I", program)
    return {"atoms": atoms, "states": states, "intervals": intervals}


def _unpack(program: bytes) -> tuple[int, list[int], bytes, tuple[int, ...], bytes, int]:
    """A program's atom count, interval starts and atoms, transitions, accepts at the end and
    invalid atom."""
    _, _, atoms, states, intervals, invalid_atom, _ = struct.unpack_from("<4s6I", program)
    at = struct.calcsize("<4s6I")
    starts = list(struct.unpack_from(f"<{intervals}I", program, at))
    at += 4 * intervals
    interval_atoms = program[at : at + intervals]
    at += intervals
    transition = struct.unpack_from(f"<{states * atoms}H", program, at)
    at += 2 * states * atoms
    return atoms, starts, interval_atoms, transition, program[at : at + states], invalid_atom


def same_split(first: bytes, second: bytes) -> bool:
    """Whether two programs split every text alike.  A match ends where the automaton last
    flagged a match end before it died, or at the end of the text where the state there
    accepts it; so a walk over the pairs of states, each with whether the two last flags fell
    on the same position, checks that on every character (and an invalid UTF-8 byte) the two
    die together with their last flags on the same position, and that at the end of the text
    both accept it, or neither does with their last flags on the same position.  (It refuses
    some pairs that split alike, e.g. where one automaton lives on without flagging anything
    after the other died: a refusal only costs speed.)

    ```
    >>> same_split(compile_pattern(r"\\p{L}+|\\P{L}"), compile_pattern(r"\\p{L}++|[^\\p{L}]"))
    True
    >>> same_split(compile_pattern(r"\\p{L}+|\\P{L}"), compile_pattern(r"\\p{L}|\\P{L}"))
    False
    ```
    """
    a_atoms, a_starts, a_interval_atoms, a_transition, a_accepts, a_invalid = _unpack(first)
    b_atoms, b_starts, b_interval_atoms, b_transition, b_accepts, b_invalid = _unpack(second)
    pairs = {(a_invalid, b_invalid)}  # the atoms that a character has in each
    for point in sorted(set(a_starts) | set(b_starts)):
        if SURROGATES[0] <= point < SURROGATES[1]:
            continue  # (no character of UTF-8 text)
        pairs.add((a_interval_atoms[bisect.bisect_right(a_starts, point) - 1],
                   b_interval_atoms[bisect.bisect_right(b_starts, point) - 1]))
    seen = {(1, 1, True)}  # (state, state, whether the last match ends are the same)
    stack = [(1, 1, True)]
    while stack:
        a_state, b_state, same = stack.pop()
        if a_accepts[a_state] != b_accepts[b_state] or not (a_accepts[a_state] or same):
            return False
        for a_atom, b_atom in pairs:
            a_step = a_transition[a_state * a_atoms + a_atom]
            b_step = b_transition[b_state * b_atoms + b_atom]
            a_next, b_next = a_step & ~MATCHED, b_step & ~MATCHED
            a_flag, b_flag = bool(a_step & MATCHED), bool(b_step & MATCHED)
            now_same = a_flag and b_flag or same and not a_flag and not b_flag
            if a_next == 0 or b_next == 0:
                if a_next != b_next or not now_same:
                    return False
                continue
            if (a_next, b_next, now_same) not in seen:
                seen.add((a_next, b_next, now_same))
                stack.append((a_next, b_next, now_same))
    return True
