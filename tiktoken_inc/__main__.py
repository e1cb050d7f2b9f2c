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
$ python -m tiktoken_inc encode --encoding gpt2 --format u16 --eot --output train.bin corpus/
```
Special-token text is ordinary text unless `--allow-special` is given.  `--stream` reads the
input as it arrives and writes each id (one per line, flushed) as soon as it is final;
`--no-pretokenize` encodes without the regex pre-split.  `decode` writes UTF-8 text; ids whose
bytes are not UTF-8 are decoded with `--errors` (default `replace`, as `Encoding.decode`;
`surrogateescape` writes the raw bytes).  The default encoding is o200k_base.

With `--output OUT.bin`, `encode` tokenizes a corpus (tiktoken_inc/corpus.py): the ids of
every document of every FILE, DIR (recursively) or - go to OUT.bin as one flat array of
little-endian u16 or u32 (`--format`, default u32), and the int64 offsets of the documents to
OUT.idx (documents + 1 values).  A document is a file, or with `--lines` a line of one;
`--eot` ends each document with <|endoftext|>.  Without `--output`, `--lines` prints one id
per line, as before.  User errors print one line to stderr and exit with status 2.
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

    def add(name: str, help_text: str, input_help: str, nargs: str = "?") -> argparse.ArgumentParser:
        command = commands.add_parser(name, help=help_text, description=help_text)
        which = command.add_mutually_exclusive_group()
        which.add_argument(
            "-e", "--encoding", metavar="NAME",
            help=f"encoding name (default {DEFAULT_ENCODING}): {', '.join(ENCODING_CONSTRUCTORS)}",
        )
        which.add_argument("-m", "--model", metavar="MODEL", help="pick the encoding of this model, e.g. gpt-4o")
        command.add_argument("input", nargs=nargs, default="-" if nargs == "?" else ["-"], metavar="FILE",
                             help=input_help)
        return command

    for name, help_text in (
        ("count", "print the number of tokens"),
        ("encode", "print the token ids, or write those of a corpus to a file (--output)"),
    ):
        inputs_help = "UTF-8 text file, or - for standard input (default)"
        if name == "encode":
            inputs_help += "; with --output, any number of files, directories (read recursively) and -"
        command = add(name, help_text, inputs_help, "*" if name == "encode" else "?")
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
            command.add_argument(
                "--lines", action="store_true",
                help="print one id per line instead of space-separated; with --output: each line of the "
                "input (without its newline) is a document",
            )
            corpus = command.add_argument_group("corpus (with --output)")
            corpus.add_argument(
                "-o", "--output", metavar="OUT.bin",
                help="write the ids of all documents to OUT.bin as one flat binary array, and the int64 "
                "offsets of the documents (documents + 1 values) to OUT.idx",
            )
            corpus.add_argument(
                "--format", choices=["u16", "u32"], default=None,
                help="little-endian ids of 16 or 32 bits (default u32); u16 refuses an encoding whose ids "
                "do not fit",
            )
            corpus.add_argument("--eot", action="store_true", help="end every document with <|endoftext|>")
            corpus.add_argument(
                "--threads", type=int, metavar="N", default=None,
                help="encoding threads (default: every CPU this process may use)",
            )
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


def _check_modes(args: argparse.Namespace) -> None:
    """UsageError for options that do not go together (print mode or corpus mode)."""
    if args.command != "encode":
        return
    if args.output is None:
        for option, given in (("--format", args.format), ("--eot", args.eot), ("--threads", args.threads)):
            if given:
                raise UsageError(f"{option} needs --output (it is for writing a corpus to a file)")
        if len(args.input) > 1:
            raise UsageError("several inputs need --output (to print ids, give one FILE or -)")
        args.input = args.input[0]
    elif args.stream:
        raise UsageError("--stream prints ids as they come; --output writes a corpus: choose one")
    elif args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {args.threads}")


def _run_corpus(args: argparse.Namespace, encoding, stdin: BinaryIO) -> None:
    """encode --output: the corpus command (tiktoken_inc/corpus.py)."""
    from tiktoken_inc.corpus import CorpusError, write_corpus

    try:
        stats = write_corpus(
            encoding, args.input, args.output, id_format=args.format or "u32", lines=args.lines, eot=args.eot,
            allow_special=args.allow_special, num_threads=args.threads, stdin=stdin,
        )
    except CorpusError as error:
        raise UsageError(str(error)) from None
    if sys.stderr.isatty():
        print(
            f"{stats.documents} documents, {stats.tokens} tokens ({stats.bytes / 2**20:.1f} MiB in "
            f"{stats.seconds:.1f} s) -> {stats.paths[0]}, {stats.paths[1]}",
            file=sys.stderr,
        )


def _run(args: argparse.Namespace, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Carries out one command, writing its output to stdout."""
    _check_modes(args)
    encoding = _encoding(args)
    if getattr(args, "output", None) is not None:
        _run_corpus(args, encoding, stdin)
        return
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
