"""tiktoken's pattern syntax, translated for the `regex` package.

tiktoken compiles `pat_str` with Rust's `fancy-regex` (over the `regex` crate); patterns that
no C pre-splitter implements are split here with the `regex` package.  The two read some of
the same text differently, so a pattern is translated first, construct by construct, into
what the `regex` package (version 1 syntax, simple case folding) matches the same way:

| tiktoken (Rust)                         | `regex` package, as given              | translated to             |
|-----------------------------------------|----------------------------------------|---------------------------|
| `[a&&b]`, `[a--b]`, `[a~~b]`: set operations, all of one precedence, left to right | V0: literal `&`, `-`, `~`; V1: `--` binds tighter than `&&`, tighter than `~~` | nested sets, left to right (V1) |
| `[[a]b]`: nested class (union)          | V0: a literal `[`                      | nested set (V1)           |
| `[a||b]`: a literal `|`                 | V1: union                              | `\\|`                     |
| `[[:alpha:]]`: ASCII                    | Unicode                                | the ASCII ranges          |
| `$` (no `m` flag): end of text only     | also before a final `\\n`              | `\\Z`                     |
| `\\Z`: end, or before final `\\n`s       | end only                               | `(?=\\n*\\Z)`              |
| `\\z`                                   | (not in `re`)                          | `\\Z`                     |
| `\\x{...}`, `\\u{...}`, `\\U{...}`, `\\e` | errors                                 | the character             |
| `\\k<name>`                             | error                                  | `(?P=name)`               |
| `\\b{start}`, `\\b{end}`, `\\b{start-half}`, `\\b{end-half}` | errors             | lookarounds on `\\w`      |
| `(?x)` verbose mode, `(?#...)`          | differs inside classes                 | whitespace and comments dropped here |
| `\\h`: an ASCII hex digit; `\\<`, `\\>`    | other meanings                         | `[0-9A-Fa-f]`; lookarounds |
| `(?i)`: simple case folding             | V1: full case folding (`ß` ~ `ss`)     | `(?-f)`                   |
| `(?i)[a-z]`: each operand folded         | folds differently (`İ` ~ `i`)          | the folded set, spelled out (ASCII classes) |
| flags hold to the end of the pattern or of `(?flags:...)`, not of other groups | to the end of the group | each atom carries its own |

Possessive quantifiers, atomic groups, lookarounds, backreferences and the Unicode classes
`\\d`, `\\w`, `\\s`, `\\p{...}` mean the same in both (every code point checked against
tiktoken; where tiktoken's Unicode tables are older, `_unicode_compat` lists the code points
and the splitter substitutes stand-ins).  Anything else -- the `U` and `R` flags, `\\G`, `\\K`,
`\\R`, Unicode properties and non-ASCII class members under `(?i)` (tiktoken's engine folds
those in ways of its own) -- raises ValueError: a pattern is split exactly as tiktoken splits
it, or refused.

```
>>> to_regex(r"[\\p{L}&&[^\\p{Han}]]+|\\s+$")
'(?V1-f)[[\\\\p{L}]&&[[^[\\\\p{Han}]]]]+|\\\\s+\\\\Z'
```
"""
from __future__ import annotations

import functools

#: tiktoken's `[[:name:]]` classes: ASCII only.
_POSIX_CLASSES = {
    "alnum": r"0-9A-Za-z",
    "alpha": r"A-Za-z",
    "ascii": r"\x00-\x7f",
    "blank": r"\t ",
    "cntrl": r"\x00-\x1f\x7f",
    "digit": r"0-9",
    "graph": r"!-~",
    "lower": r"a-z",
    "print": r" -~",
    "punct": r"!-/:-@\[-`{-~",
    "space": r"\t\n\x0b\x0c\r ",
    "upper": r"A-Z",
    "word": r"0-9A-Za-z_",
    "xdigit": r"0-9A-Fa-f",
}

#: One-letter escapes that stand for a character.
_CHARACTER_ESCAPES = {"a": "\a", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "e": "\x1b"}

#: Escapes that mean the same class in both syntaxes (inside and outside brackets).
_CLASS_ESCAPES = frozenset("dDsSwW")

#: Property names that tiktoken's engine replaces with definitions of its own.
_REMAPPED_PROPERTIES = frozenset({"alnum", "blank", "cntrl", "word", "graph", "print", "cs"})

#: Rust's word-boundary assertions of regex 1.10, as lookarounds on \w.
_BOUNDARIES = {
    "start": r"\b(?=\w)",
    "end": r"\b(?<=\w)",
    "start-half": r"(?<!\w)",
    "end-half": r"(?!\w)",
}


class _Translator:
    """One pass over a pattern in tiktoken's syntax, writing the `regex` package's."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.at = 0
        #: The flags in force, as tiktoken's parser keeps them: set by "(?flags)" up to the
        #: end of the pattern or of the enclosing "(?flags:...)" group, whichever comes
        #: first -- the end of any other group does not restore them.
        self.flags: dict[str, bool] = {"i": False, "m": False, "s": False, "x": False}
        #: At each open group: the flags to restore at its ")" (None: keep them).
        self.saved: list[dict[str, bool] | None] = []

    def refuse(self, what: str, at: int | None = None) -> ValueError:
        position = self.at if at is None else at
        return ValueError(
            f"pat_str {self.pattern!r}: {what} (at position {position}) cannot be split here exactly "
            "as tiktoken splits it; rewrite the pattern without it"
        )

    def peek(self, offset: int = 0) -> str:
        index = self.at + offset
        return self.pattern[index] if index < len(self.pattern) else ""

    def take(self, text: str) -> bool:
        if self.pattern.startswith(text, self.at):
            self.at += len(text)
            return True
        return False

    # ------------------------------------------------------------ outside classes
    def translate(self) -> str:
        out = ["(?V1-f)"]
        while self.at < len(self.pattern):
            out.append(self.item())
        if self.saved:
            raise self.refuse("an unclosed group")
        return "".join(out)

    def item(self) -> str:
        char = self.pattern[self.at]
        if self.flags["x"] and char in " \t\n\r":
            self.at += 1
            return ""
        if self.flags["x"] and char == "#":
            end = self.pattern.find("\n", self.at)
            self.at = len(self.pattern) if end < 0 else end + 1
            return ""
        if char == "(" and self.pattern.startswith("(?#", self.at):
            end = self.pattern.find(")", self.at)
            if end < 0:
                raise self.refuse("an unterminated comment")
            self.at = end + 1
            return ""
        if char == "\\":
            if self.peek(1) in ("p", "P"):
                return self.escape(in_class=False)  # (refused under "i")
            return self.case(self.escape(in_class=False))
        if char == "[":
            return self.bracket_class()  # (folded operand by operand under "i")
        if char == "(":
            return self.group()
        self.at += 1
        if char == ")":
            if not self.saved:
                raise self.refuse("an unopened ')'", self.at - 1)
            restore = self.saved.pop()
            if restore is not None:
                self.flags = restore
            return ")"
        if char == ".":
            return "(?s:.)" if self.flags["s"] else "[^\\n]"
        if char == "^":
            return "(?m:^)" if self.flags["m"] else "\\A"
        if char == "$":
            return "(?m:$)" if self.flags["m"] else "\\Z"
        if char in "|*+?":
            return char
        if char == "{":
            return self.repetition()
        return self.case(_literal(char))

    def case(self, atom: str) -> str:
        """`atom` (a literal, a backreference), case-insensitive where the "i" flag is on
        (flags are never left on in the translation: their scopes differ, so each atom
        carries its own)."""
        if not self.flags["i"] or not atom:
            return atom
        return _DOTTED_I_FOLDS.get(atom) or f"(?i:{atom})"

    def repetition(self) -> str:
        """After "{": a counted repetition ("{n}", "{n,}", "{n,m}", "{,m}") or a literal "{"."""
        end = self.pattern.find("}", self.at)
        body = self.pattern[self.at:end] if end >= 0 else ""
        if self.flags["x"]:
            body = "".join(body.split())
        low, comma, high = body.partition(",")
        if end >= 0 and (low.isdigit() or (comma and high.isdigit())) and (not high or high.isdigit()):
            if low and not low.isascii() or high and not high.isascii():
                raise self.refuse("a repetition count that is not ASCII digits")
            self.at = end + 1
            return "{" + low + comma + high + "}"
        return "\\{"

    def group(self) -> str:
        start = self.at
        self.saved.append(None)
        self.at += 1
        if not self.take("?"):
            return "("
        if self.take("P="):  # a backreference by name
            end = self.pattern.find(")", self.at)
            if end < 0:
                raise self.refuse("an unterminated backreference", start)
            name = self.pattern[self.at:end]
            self.at = end + 1
            self.saved.pop()
            return self.case(f"(?P={name})")
        if self.take(":"):  # a flag group without flags: it too restores them at its end
            self.saved[-1] = dict(self.flags)
            return "(?:"
        for opening in ("=", "!", "<=", "<!", ">"):
            if self.take(opening):
                return "(?" + opening
        if self.pattern.startswith(("P<", "<"), self.at) and not self.pattern.startswith(("P<=", "P<!"), self.at):
            self.take("P<") or self.take("<")
            end = self.pattern.find(">", self.at)
            if end < 0:
                raise self.refuse("an unterminated group name", start)
            name = self.pattern[self.at:end]
            self.at = end + 1
            return f"(?P<{name}>"
        return self.flag_group(start)

    def flag_group(self, start: int) -> str:
        """After "(?": flags, then ")" (in force from here on) or ":" (inside the group only)."""
        before = dict(self.flags)
        on = True
        while True:
            char = self.peek()
            self.at += 1
            if char == "-" and on:
                on = False
            elif char in "imsx" and char:
                self.flags[char] = on
            elif char == "u" and on:
                pass  # Unicode mode is the default
            elif char in (")", ":") and char and self.pattern[self.at - 2] not in "?-":
                break
            else:
                raise self.refuse(f"the group {self.pattern[start:self.at]!r}", start)
        if char == ":":
            self.saved[-1] = before
            return "(?:"
        self.saved.pop()  # no group: the flags hold until the enclosing "(?flags:...)" ends
        return ""

    # ------------------------------------------------------------ escapes
    def escape(self, in_class: bool) -> str:
        start = self.at
        self.at += 1
        char = self.peek()
        if not char:
            raise self.refuse("a trailing backslash", start)
        self.at += 1
        if char in _CLASS_ESCAPES:
            return "\\" + char
        if char in "hH":
            return "[0-9A-Fa-f]" if char == "h" else "[^0-9A-Fa-f]"
        if char in "pP":
            if self.peek() == "{":
                end = self.pattern.find("}", self.at)
                if end < 0:
                    raise self.refuse("an unterminated \\p{...}", start)
                name = self.pattern[self.at + 1:end]
                self.at = end + 1
            else:
                name = self.peek()
                if not name:
                    raise self.refuse("an incomplete \\p", start)
                self.at += 1
            loose = "".join(c for c in name.lstrip("^").lower() if c not in " _-")
            if loose in _REMAPPED_PROPERTIES:
                raise self.refuse(f"the property {name!r} (tiktoken's engine reads it its own way)", start)
            if name.startswith("^"):
                char, name = "Pp"[char == "P"], name[1:]
            if self.flags["i"]:
                raise self.refuse("a Unicode property under the case-insensitive flag", start)
            return "\\" + char + "{" + name + "}"
        if in_class and char == "b":
            return _literal("\b")
        if char in _CHARACTER_ESCAPES:
            return _literal(_CHARACTER_ESCAPES[char])
        if char in "xuU":
            return _literal(self.code_point(char, start))
        if not in_class:
            if char in "AbB":
                if char == "b" and self.peek() == "{":
                    end = self.pattern.find("}", self.at)
                    kind = self.pattern[self.at + 1:end] if end >= 0 else ""
                    if kind not in _BOUNDARIES:
                        raise self.refuse(f"the assertion \\b{{{kind}}}", start)
                    self.at = end + 1
                    return _BOUNDARIES[kind]
                return "\\" + char
            if char == "z":
                return "\\Z"
            if char == "Z":
                return "(?=\\n*\\Z)"
            if char in "<>":
                return _BOUNDARIES["start" if char == "<" else "end"]
            if char == "N":
                return "[^\\n]"
            if char == "O":
                return "(?s:.)"
            if char.isdigit() and char != "0":
                digits = char
                while self.peek().isdigit():
                    digits += self.peek()
                    self.at += 1
                return f"(?:\\{digits})"
            if char == "k" and self.peek() in "<{":
                close = ">" if self.peek() == "<" else "}"
                end = self.pattern.find(close, self.at)
                if end < 0:
                    raise self.refuse("an unterminated \\k", start)
                name = self.pattern[self.at + 1:end]
                self.at = end + 1
                return f"(?P={name})" if not name.isdigit() else f"(?:\\{name})"
        if not char.isalnum() and char.isascii() and char.isprintable():
            return _literal(char)  # an escaped punctuation character: itself
        raise self.refuse(f"the escape \\{char}", start)

    def code_point(self, kind: str, start: int) -> str:
        """After \\x, \\u or \\U: the character of the hex digits that follow."""
        if self.peek() == "{":
            end = self.pattern.find("}", self.at)
            digits = self.pattern[self.at + 1:end] if end >= 0 else ""
            self.at = end + 1
        else:
            width = {"x": 2, "u": 4, "U": 8}[kind]
            digits = self.pattern[self.at:self.at + width]
            self.at += width
            if len(digits) != width:
                digits = ""
        try:
            value = int(digits, 16) if digits and all(c in "0123456789abcdefABCDEF" for c in digits) else -1
            return chr(value)
        except (ValueError, OverflowError):
            raise self.refuse(f"the escape {self.pattern[start:self.at]!r}", start) from None

    # ------------------------------------------------------------ classes
    def bracket_class(self) -> str:
        """A bracketed class, from its "[", as a `regex` V1 set with explicit nesting."""
        start = self.at
        self.at += 1
        negated = self.take("^")
        result = ""
        operator = ""
        first = True
        while True:
            term = self.union_term(first)
            first = False
            if not term:
                raise self.refuse("an empty operand of a class set operation", start)
            if self.flags["i"]:  # each operand is closed under case folding, then combined
                term = _fold_class(term)
            result = term if not operator else f"[{result}{operator}{term}]"
            for candidate in ("&&", "--", "~~"):
                if self.take(candidate):
                    operator = candidate
                    break
            else:
                if not self.take("]"):
                    raise self.refuse("an unterminated class", start)
                break
        return f"[^{result}]" if negated else result

    def union_term(self, first: bool) -> str:
        """The items up to the next set operator or "]", as one V1 set "[...]" ("" if none)."""
        items: list[str] = []
        while True:
            char = self.peek()
            if not char:
                raise self.refuse("an unterminated class")
            if char == "]" and not (first and not items):
                break
            if self.pattern.startswith(("&&", "--", "~~"), self.at) and items:
                break
            if char == "[":
                if self.pattern.startswith("[:", self.at):
                    end = self.pattern.find(":]", self.at + 2)
                    name = self.pattern[self.at + 2:end] if end >= 0 else ""
                    negate = name.startswith("^")
                    if name.lstrip("^") in _POSIX_CLASSES:
                        self.at = end + 2
                        items.append(f"[{'^' if negate else ''}{_POSIX_CLASSES[name.lstrip('^')]}]")
                        continue
                items.append(self.bracket_class())
                continue
            kind, low = self.class_atom()
            if self.flags["i"] and kind == "char" and not low.isascii():
                raise self.refuse("a class with characters beyond ASCII under the case-insensitive flag")
            if kind == "class":  # \d, \p{...}: no range may start or end here
                items.append(low)
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                save = self.at
                self.at += 1
                kind, high = self.class_atom() if self.peek() != "[" else ("class", "")
                if kind == "class":
                    raise self.refuse("a class range whose end is not a character", save)
                if self.flags["i"] and not high.isascii():
                    raise self.refuse("a class with characters beyond ASCII under the case-insensitive flag", save)
                if ord(high) < ord(low):
                    raise self.refuse("a class range whose end is before its start", save)
                items.append(_literal(low) + "-" + _literal(high))
            else:
                items.append(_literal(low))
        return "[" + "".join(items) + "]" if items else ""

    def class_atom(self) -> tuple[str, str]:
        """One item of a class: ("char", the character) or ("class", \\d or \\p{...} written)."""
        char = self.pattern[self.at]
        if char != "\\":
            self.at += 1
            return "char", char
        if self.peek(1) in _CLASS_ESCAPES or self.peek(1) in "pP":
            return "class", self.escape(in_class=True)
        return "char", _unescape(self.escape(in_class=True))


#: The four characters whose case folding the `regex` package extends beyond tiktoken's
#: simple case folding: "I" and "i" fold only to each other, "\u0130" and "\u0131" to nothing.
_DOTTED_I_FOLDS = {"I": "[Ii]", "i": "[Ii]", "\u0130": "\u0130", "\u0131": "\u0131"}


#: What a letter of an ASCII class also matches under "i" (simple case folding): its other
#: case, and for "k" and "s" the Kelvin sign and the long s.
_ASCII_CASE_ORBITS = {
    **{letter: letter + letter.swapcase() for letter in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"},
    "k": "kK\u212a", "K": "kK\u212a", "s": "sS\u017f", "S": "sS\u017f",
}


@functools.lru_cache(maxsize=256)
def _fold_class(written: str) -> str:
    """An ASCII set (V1, as written here) closed under case folding: what tiktoken's engine
    matches with it under the "i" flag."""
    import regex

    member = regex.compile("(?V1-f)" + written)
    added = {variant for char, orbit in _ASCII_CASE_ORBITS.items() if member.fullmatch(char) for variant in orbit}
    added = {char for char in added if not member.fullmatch(char)}
    if not added:
        return written
    return "[" + written + "".join(_literal(char) for char in sorted(added)) + "]"


def _literal(char: str) -> str:
    """`char` written so that the `regex` package (V1) reads it as itself."""
    if char.isalnum() or ord(char) > 0x7F:
        return char
    if char.isprintable() and char != " ":
        return "\\" + char
    return f"\\x{ord(char):02x}"


def _unescape(written: str) -> str:
    """The character that `_literal` wrote."""
    if written.startswith("\\x"):
        return chr(int(written[2:], 16))
    if written.startswith("\\"):
        return written[1:]
    return written


@functools.lru_cache(maxsize=256)
def to_regex(pat_str: str) -> str:
    """`pat_str` (tiktoken's syntax) as a pattern for the `regex` package that matches the
    same text at the same places; ValueError for a construct that cannot be translated.

    ```
    >>> to_regex(r"\\w+$")
    '(?V1-f)\\\\w+\\\\Z'
    ```
    """
    return _Translator(pat_str).translate()
