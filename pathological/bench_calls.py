"""The cost of one call of each method on a small argument, tiktoken_inc beside tiktoken.

What programs call many times on little: `encode` and `encode_ordinary` of a short message,
`count_tokens` of one, without a limit and with one that it fits and one that it passes
(tiktoken: `len(encode(text))`, compared with the limit), `decode` and `decode_bytes` of a few
ids and of one (a stream of ids decoded as it comes), and the one-token conversions that
constrained-decoding libraries make for every id of a vocabulary: `decode_single_token_bytes`
and `encode_single_token` (of a mergeable token's str and bytes, and of a special token).
Each figure is microseconds per call: a loop of --calls calls, process CPU time, best of
--repeat rounds, the two libraries alternating round by round; the answers are compared
first.

    python pathological/bench_calls.py [--encodings cl100k_base o200k_base] [--repeat 7]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_load import best_of_rounds, loop_timer, offline_tiktoken_cache  # noqa: E402

MESSAGE = "Summarize the attached report in three sentences, please."


def calls(enc: Any, tiktoken_side: bool) -> dict[str, Callable[[], object]]:
    """The calls measured, each a zero-argument function (tiktoken counts with len(encode))."""
    ids = enc.encode(MESSAGE)
    few, one = ids[:8], ids[:1]
    token = ids[1]
    piece = enc.decode_single_token_bytes(token)
    text = piece.decode("utf-8")
    count = (lambda: len(enc.encode(MESSAGE))) if tiktoken_side else (lambda: enc.count_tokens(MESSAGE))

    def count_within(limit: int) -> Callable[[], object]:
        if not tiktoken_side:
            return lambda: enc.count_tokens(MESSAGE, limit=limit)

        def count_and_compare() -> object:
            count = len(enc.encode(MESSAGE))
            return None if count > limit else count
        return count_and_compare
    return {
        "encode(message)": lambda: enc.encode(MESSAGE),
        "encode_ordinary(message)": lambda: enc.encode_ordinary(MESSAGE),
        "count_tokens(message)": count,
        "count_tokens(message, limit=1000)": count_within(1000),
        "count_tokens(message, limit=4)": count_within(4),
        "decode(8 ids)": lambda: enc.decode(few),
        "decode(1 id)": lambda: enc.decode(one),
        "decode_bytes(8 ids)": lambda: enc.decode_bytes(few),
        "decode_single_token_bytes(id)": lambda: enc.decode_single_token_bytes(token),
        "encode_single_token(str)": lambda: enc.encode_single_token(text),
        "encode_single_token(bytes)": lambda: enc.encode_single_token(piece),
        "encode_single_token(special)": lambda: enc.encode_single_token("<|endoftext|>"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encodings", nargs="+", default=["cl100k_base", "o200k_base"])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--calls", type=int, default=100_000, help="calls per timed loop")
    args = parser.parse_args()
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", offline_tiktoken_cache())
    import tiktoken

    import tiktoken_inc

    print(f"Microseconds per call (process CPU time, loops of {args.calls}, best of {args.repeat} rounds, "
          "the libraries alternating)")
    header = f"{'encoding':<12} {'call':<34} {'tiktoken us':>11} {'ours us':>8} {'tiktoken/ours':>13}"
    print(header)
    print("-" * len(header))
    for name in args.encodings:
        ours, theirs = calls(tiktoken_inc.get_encoding(name), False), calls(tiktoken.get_encoding(name), True)
        for label in ours:
            if ours[label]() != theirs[label]():
                print(f"{name:<12} {label:<34} MISMATCH: {ours[label]()!r} != {theirs[label]()!r}", flush=True)
                continue
            seconds, _ = best_of_rounds({"tiktoken": loop_timer(theirs[label], args.calls),
                                         "ours": loop_timer(ours[label], args.calls)}, args.repeat)
            print(f"{name:<12} {label:<34} {seconds['tiktoken'] * 1e6:>11.3f} {seconds['ours'] * 1e6:>8.3f} "
                  f"{seconds['tiktoken'] / seconds['ours']:>13.2f}", flush=True)


if __name__ == "__main__":
    main()
