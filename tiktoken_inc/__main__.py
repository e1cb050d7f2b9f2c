"""Command line: count, encode and decode tokens.

```
$ python -m tiktoken_inc count --encoding cl100k_base README.md
1234
$ echo "hello world" | python -m tiktoken_inc encode
24912 2375 198
$ echo "24912 2375" | python -m tiktoken_inc decode
hello world
$ python -m tiktoken_inc --version
$ tail -f log.txt | python -m tiktoken_inc encode --stream
```
Special-token text is ordinary text unless `--allow-special` is given.  `--stream` reads the
input as it arrives and writes each id (one per line, flushed) as soon as it is final;
`--no-pretokenize` encodes without the regex pre-split.  `decode` writes UTF-8 text; ids whose
bytes are not UTF-8 are decoded with `--errors` (default `replace`, as `Encoding.decode`;
`surrogateescape` writes the raw bytes).  The default encoding is o200k_base.  User errors
print one line to stderr and exit with status 2.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from typing import BinaryIO, Sequence

from tiktoken_inc.registry import ENCODING_CONSTRUCTORS

DEFAULT_ENCODING = "o200k_base"


class UsageError(Exception):
    """A mistake in the command line or the input: reported in one line, exit status 2."""


def _parser() -> argparse.ArgumentParser:
    """The argument parser: one subcommand per action."""
    invoked_as = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    parser = argparse.ArgumentParser(
        prog=invoked_as if invoked_as not in ("", "__main__.py", "-c") else "python -m tiktoken_inc",
        description="Count, encode or decode tokens with tiktoken's encodings (offline).",
    )
    from tiktoken_inc import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, help_text: str, input_help: str) -> argparse.ArgumentParser:
        command = commands.add_parser(name, help=help_text, description=help_text)
        which = command.add_mutually_exclusive_group()
        which.add_argument(
            "-e", "--encoding", metavar="NAME",
            help=f"encoding name (default {DEFAULT_ENCODING}): {', '.join(ENCODING_CONSTRUCTORS)}",
        )
        which.add_argument("-m", "--model", metavar="MODEL", help="pick the encoding of this model, e.g. gpt-4o")
        command.add_argument("input", nargs="?", default="-", metavar="FILE", help=input_help)
        return command

    for name, help_text in (("count", "print the number of tokens"), ("encode", "print the token ids")):
        command = add(name, help_text, "UTF-8 text file, or - for standard input (default)")
        command.add_argument(
            "--allow-special", action="store_true",
            help="encode special-token text such as <|endoftext|> as special tokens",
        )
        command.add_argument(
            "--no-pretokenize", action="store_true",
            help="no regex pre-split: the text between special tokens is one BPE piece",
        )
        command.add_argument(
            "--stream", action="store_true",
            help="read the input as it arrives, in bounded memory"
            + ("; write each id as soon as it is final, one per line, flushed" if name == "encode" else ""),
        )
        if name == "encode":
            command.add_argument("--lines", action="store_true", help="one id per line instead of space-separated")
    decode = add("decode", "print the text of token ids", "file of ids separated by spaces, commas or newlines, or - (default)")
    decode.add_argument(
        "--errors", default="replace", metavar="HANDLER",
        choices=("strict", "replace", "ignore", "backslashreplace", "surrogateescape"),
        help="what to do with bytes that are not UTF-8, as in Encoding.decode: strict, replace "
        "(default), ignore, backslashreplace, or surrogateescape (the raw bytes)",
    )
    return parser


def _read_input(path: str, stdin: BinaryIO) -> bytes:
    """The bytes of FILE, or of standard input for '-'."""
    if path == "-":
        return stdin.read()
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, not a file") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read ({e.strerror})") from None


def _read_text(path: str, stdin: BinaryIO) -> str:
    """FILE as UTF-8 text; a clear error naming the first bad byte otherwise."""
    data = _read_input(path, stdin)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        name = "standard input" if path == "-" else path
        raise UsageError(f"{name}: not UTF-8 text (byte {e.start} is {data[e.start]:#04x})") from None


def _parse_ids(data: bytes, path: str) -> list[int]:
    """Token ids separated by whitespace or commas (surrounding [ ] allowed)."""
    text = data.decode("utf-8", errors="replace").strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    ids = []
    for field in re.split(r"[\s,]+", text.strip()):
        if not field:
            continue
        if not field.isdigit() or not field.isascii():
            name = "standard input" if path == "-" else path
            raise UsageError(f"{name}: {field[:40]!r} is not a token id (expected non-negative integers)")
        ids.append(int(field))
    return ids


def _encoding(args: argparse.Namespace):
    """The Encoding chosen by --encoding or --model."""
    import tiktoken_inc

    if args.model is not None:
        try:
            name = tiktoken_inc.encoding_name_for_model(args.model)
        except KeyError:
            raise UsageError(f"unknown model {args.model!r}; pass --encoding NAME instead") from None
    else:
        name = args.encoding or DEFAULT_ENCODING
    if name not in tiktoken_inc.list_encoding_names():
        known = ", ".join(tiktoken_inc.list_encoding_names())
        raise UsageError(f"unknown encoding {name!r}; choose one of: {known}")
    return tiktoken_inc.get_encoding(name, pretokenize=not getattr(args, "no_pretokenize", False))


#: Bytes asked for per read in --stream mode (a read returns as soon as any input is there).
STREAM_READ_SIZE = 1 << 16


def _open_stream(path: str, stdin: BinaryIO) -> BinaryIO:
    """Standard input for '-', else FILE opened for reading in binary."""
    if path == "-":
        return stdin
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, not a file") from None
    except OSError as e:
        raise UsageError(f"{path}: cannot read ({e.strerror})") from None


def _run_stream(args: argparse.Namespace, encoding, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """encode/count --stream: feeds the input to a stream encoder as it arrives.

    `encode` writes every id as soon as it is final (one per line, flushed), so a reader
    sees ids while the writer is still writing; `count` prints the total at the end.
    Memory stays bounded by the unresolved window, whatever the input size.
    """
    from tiktoken_inc.streaming import InvalidUTF8Error

    allowed: object = "all" if args.allow_special else frozenset()
    encoder = encoding.stream_encoder(allowed_special=allowed, disallowed_special=())
    source = _open_stream(args.input, stdin)
    read = getattr(source, "read1", source.read)
    total = 0
    try:
        while True:
            chunk = read(STREAM_READ_SIZE)
            ids = encoder.feed(chunk) if chunk else encoder.finish()
            total += len(ids)
            if args.command == "encode" and ids:
                stdout.write("".join(f"{i}\n" for i in ids).encode())
                stdout.flush()
            if not chunk:
                break
    except InvalidUTF8Error as e:
        name = "standard input" if args.input == "-" else args.input
        at = f"byte {e.offset} is {e.byte:#04x}" if e.byte is not None else "it ends inside a character"
        raise UsageError(f"{name}: not UTF-8 text ({at})") from None
    finally:
        if source is not stdin:
            source.close()
    if args.command == "count":
        stdout.write(f"{total}\n".encode())


def _run(args: argparse.Namespace, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Carries out one command, writing its output to stdout."""
    encoding = _encoding(args)
    if getattr(args, "stream", False):
        _run_stream(args, encoding, stdin, stdout)
        return
    if args.command == "decode":
        ids = _parse_ids(_read_input(args.input, stdin), args.input)
        try:
            text = encoding.decode(ids, errors=args.errors)
        except (KeyError, OverflowError) as e:
            bad = e.args[0] if isinstance(e, KeyError) else "out of range"
            raise UsageError(f"cannot decode: {bad} (the ids must come from {encoding.name})") from None
        except UnicodeDecodeError as e:
            raise UsageError(
                f"the ids decode to bytes that are not UTF-8 (at byte {e.start}); "
                "pass --errors replace, ignore or surrogateescape"
            ) from None
        stdout.write(text.encode("utf-8", "surrogateescape"))
        return
    text = _read_text(args.input, stdin)
    if args.allow_special:
        tokens = encoding.encode(text, allowed_special="all")
    else:
        tokens = encoding.encode_ordinary(text)
    if args.command == "count":
        stdout.write(f"{len(tokens)}\n".encode())
    else:
        separator = "\n" if args.lines else " "
        stdout.write((separator.join(map(str, tokens)) + "\n").encode())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m tiktoken_inc` and `tiktoken-inc`; returns the exit status.

    ```
    >>> main(["count", "--encoding", "cl100k_base", "README.md"])
    1234
    0
    ```
    """
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        _run(args, sys.stdin.buffer, sys.stdout.buffer)
        sys.stdout.flush()
    except UsageError as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error. Point stdout at devnull so
        # the interpreter's final flush does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
