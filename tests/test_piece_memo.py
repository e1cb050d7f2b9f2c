"""The memo of short pieces kept from call to call (csrc/piece_memo.h) never changes an id.

Encoding keeps, per thread, the ids of short pieces that are no token, so that a piece that
comes again costs a look-up.  These tests make the memo hit, miss, and lose slots to other
pieces, and compare every call with tiktoken:
- a small vocabulary, whose token hash has few slots: the memo's slots (indexed by the hash
  slot) are then shared by many pieces, and pieces of one batch take each other's slots
  between the look-up and the copy (encode.c finds a piece again before it copies);
- pieces at the memo's limits: 26 to 28 bytes, and 7 to 9 ids;
- the same texts again, after `clear_cache()`, in batches on two threads, and on four
  threads (each takes a memo of its own from the encoding's pool) while a fifth keeps
  clearing the memos;
- cl100k_base on words that are no token, repeated within a call and from call to call.
"""
from __future__ import annotations

import random
import threading

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

import tiktoken_inc

PATTERN = r" ?[a-c]+| ?[^a-c\s]+|\s+"
MERGES = [b"ab", b"bc", b"ca", b"abc", b"bca", b"aa", b" a", b" b", b" ab", b"cc", b"abca", b"bb"]


def small_encodings() -> tuple[tiktoken_inc.Encoding, tiktoken.Encoding]:
    ranks = {bytes([b]): b for b in range(256)}
    for token in MERGES:
        ranks[token] = len(ranks)
    ours = tiktoken_inc.Encoding("memo_small", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={})
    theirs = tiktoken.Encoding("memo_small", pat_str=PATTERN, mergeable_ranks=ranks, special_tokens={})
    return ours, theirs


def words(rng: random.Random, count: int, alphabet: str, lengths: range) -> list[str]:
    return ["".join(rng.choice(alphabet) for _ in range(rng.choice(lengths))) for _ in range(count)]


def random_texts(theirs: tiktoken.Encoding, seed: int, word_count: int, alphabet: str, lengths: range,
                 count: int, most_words: int) -> tuple[list[str], list[str], list[list[int]]]:
    """(word_count words, texts of up to `most_words` of them, tiktoken's ids of each text)."""
    rng = random.Random(seed)
    vocabulary = words(rng, word_count, alphabet, lengths)
    texts = [" ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, most_words))) for _ in range(count)]
    return vocabulary, texts, [theirs.encode_ordinary(text) for text in texts]


_SMALL = small_encodings()  # one pair for the module (the hypothesis test takes no fixture)


@pytest.fixture(scope="module")
def small() -> tuple[tiktoken_inc.Encoding, tiktoken.Encoding]:
    return _SMALL


def test_small_vocabulary_slots_shared_by_many_pieces(small):
    ours, theirs = small
    # Up to 30 letters: every piece length around the memo's 27 bytes and 8 ids.
    _, texts, want = random_texts(theirs, 7, 400, "abc", range(1, 31), 300, 400)
    assert max(len(w) for w in want) > 100
    for attempt in range(3):  # a cold memo, then warm ones
        for text, expected in zip(texts, want):
            assert ours.encode_ordinary(text) == expected, (attempt, text[:80])
    ours.clear_cache()
    assert [ours.encode_ordinary(text) for text in texts] == want
    assert ours.encode_ordinary_batch(texts, num_threads=2) == want
    assert ours.encode_batch(texts, num_threads=2) == want


def test_pieces_at_the_memo_limits(small):
    """Pieces of 26, 27 and 28 bytes, and pieces of 7, 8 and 9 ids, each again and again
    in one call (the first stepped, the next from the memo where it keeps them)."""
    ours, theirs = small
    rng = random.Random(11)
    pieces = []
    for length in (26, 27, 28):
        pieces += [" " + "".join(rng.choice("abc") for _ in range(length - 1)) for _ in range(20)]
    # Pieces of 7, 8 and 9 ids, as tiktoken counts them.
    candidates = [" " + "".join(rng.choice("abc") for _ in range(rng.randint(6, 20))) for _ in range(3000)]
    by_count = {n: [p for p in candidates if len(theirs.encode_ordinary(p)) == n][:20] for n in (7, 8, 9)}
    assert all(len(found) == 20 for found in by_count.values()), {n: len(f) for n, f in by_count.items()}
    for found in by_count.values():
        pieces += found
    text = "".join(pieces * 3)
    rng.shuffle(pieces)
    text += "".join(pieces)
    for _ in range(2):
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)
        for piece in pieces:
            assert ours.encode_ordinary(piece) == theirs.encode_ordinary(piece), piece


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="abc d\n", min_size=1, max_size=40), min_size=1, max_size=30))
def test_random_calls_in_a_row(texts):
    ours, theirs = _SMALL
    for text in texts + texts:
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text), text


def test_threads_while_another_clears(small):
    ours, theirs = small
    _, texts, want = random_texts(theirs, 3, 300, "abcd", range(1, 29), 200, 60)
    done = threading.Event()
    failures: list[str] = []

    def encode_all(seed: int) -> None:
        order = list(range(len(texts)))
        random.Random(seed).shuffle(order)
        for _ in range(3):
            for i in order:
                if ours.encode_ordinary(texts[i]) != want[i]:
                    failures.append(texts[i])

    def clear_often() -> None:
        while not done.is_set():
            ours.clear_cache()

    clearer = threading.Thread(target=clear_often)
    clearer.start()
    workers = [threading.Thread(target=encode_all, args=(seed,)) for seed in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    done.set()
    clearer.join()
    assert failures == []


def test_cl100k_words_that_are_no_token(reference):
    """Words of accented letters: few are tokens, so most are stepped once, then found."""
    ours, theirs = tiktoken_inc.get_encoding("cl100k_base"), reference("cl100k_base")
    vocabulary, texts, want = random_texts(theirs, 5, 500, "aeiouäöüßéèñçøåkrstln", range(2, 14), 200, 200)
    assert sum(len(theirs.encode_ordinary(" " + word)) > 1 for word in vocabulary) > 400
    for _ in range(2):
        assert [ours.encode_ordinary(text) for text in texts] == want
    ours.clear_cache()
    assert ours.encode_ordinary_batch(texts, num_threads=2) == want
    assert [ours.count_tokens(text) for text in texts] == [len(w) for w in want]
