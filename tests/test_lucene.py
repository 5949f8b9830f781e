"""Lucene's analysis and BM25 as the embedded index reproduces them: the one-byte length norm from its definition,
BM25 scores computed by hand on both sides of the norm's exact range, and the standard tokenizer's word
boundaries (the expected tokens are what Lucene 9's StandardAnalyzer returns for the same text)."""

import math

import numpy as np
import pytest

from bench.references import stored_length
from fedmem.audit.mr.lucene import Bm25Matrix, byte4_to_int, int_to_byte4, standard_tokens


def test_length_norm_is_exact_below_40_and_rounds_down_beyond():
    assert [byte4_to_int(int_to_byte4(n)) for n in range(40)] == list(range(40))
    assert {n: byte4_to_int(int_to_byte4(n)) for n in (41, 57, 100, 1000)} == {41: 40, 57: 56, 100: 96, 1000: 984}
    for n in range(5000):
        assert byte4_to_int(int_to_byte4(n)) == stored_length(n)
    codes = [int_to_byte4(n) for n in range(100_000)]
    assert codes == sorted(codes) and max(codes) < 256


def by_hand(query: list[str], docs: list[list[str]], k1=1.2, b=0.75) -> list[float]:
    """BM25 as Lucene defines it, in double, with the stored (decoded) document lengths."""
    n, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    out = []
    for d in docs:
        s = 0.0
        for t in query:
            tf, df = d.count(t), sum(t in x for x in docs)
            if tf:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                s += idf * tf / (tf + k1 * (1 - b + b * stored_length(len(d)) / avgdl))
        out.append(s)
    return out


def test_bm25_uses_the_stored_length_on_both_sides_of_the_exact_range():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(30)]
    docs = [list(rng.choice(words, size=n)) + ["apple"] * (i % 3 + 1) for i, n in enumerate((8, 20, 37, 61, 100, 230))]
    matrix = Bm25Matrix(docs)
    for query in (["apple"], ["apple", "w3"], ["w1", "w2", "w2"]):
        expected = by_hand(query, docs)
        got = dict(matrix.search([query], k=10)[0])
        assert sorted(got) == [i for i, s in enumerate(expected) if s > 0]
        for i, s in got.items():
            assert s == pytest.approx(expected[i], rel=2e-6)
    # the norm matters: with the exact length 100 the same document scores visibly differently
    exact = Bm25Matrix([d for d in docs])
    exact_len = [len(d) for d in docs]
    assert exact_len[4] > 96 and stored_length(exact_len[4]) < exact_len[4]
    n, avgdl = len(docs), sum(exact_len) / len(docs)
    idf = math.log(1 + (n - n + 0.5) / (n + 0.5))
    tf = docs[4].count("apple")
    with_exact_length = idf * tf / (tf + 1.2 * (0.25 + 0.75 * exact_len[4] / avgdl))
    assert dict(exact.search([["apple"]], 10)[0])[4] != pytest.approx(with_exact_length, rel=1e-4)


def test_scores_are_float32_sums_and_ties_rank_by_document_order():
    docs = [["a", "b"], ["b", "a"], ["a", "b"], ["c"]]
    hits = Bm25Matrix(docs).search([["a", "b"], ["zzz"], []], k=2)
    assert [d for d, _ in hits[0]] == [0, 1] and hits[1] == [] and hits[2] == []
    assert all(float(np.float32(s)) == s for _, s in hits[0])


@pytest.mark.parametrize("text, tokens", [
    ("The lord's house cost 3.5 million in the U.S.A. in 1,000 days.",
     ["the", "lord's", "house", "cost", "3.5", "million", "in", "the", "u.s.a", "in", "1,000", "days"]),
    ("Mail bob@example.com or see https://www.gnu.org/licenses/ at 10:30 today.",
     ["mail", "bob", "example.com", "or", "see", "https", "www.gnu.org", "licenses", "at", "10", "30", "today"]),
    ("A 45-year-old man's e-mail; don\u2019t stop; S:t Eriks; abc123 and foo_bar and ___ and _x_.",
     ["a", "45", "year", "old", "man's", "e", "mail", "don\u2019t", "stop", "s:t", "eriks", "abc123", "and", "foo_bar",
      "and", "and", "_x_"]),
    ("中文字 ひらがな カタカナ Ünïcödé naïve café 3'5 1.2.3 ..5 .5 5. Mr. O'Neil's",
     ["中", "文", "字", "ひ", "ら", "が", "な", "カタカナ", "ünïcödé", "naïve", "café", "3'5", "1.2.3", "5", "5", "5", "mr",
      "o'neil's"]),
    ("x² ½ ¼ ①②  3,4;5 a'b'c 'quoted' \"double\" (paren) [bracket] #hash $100 50% a/b",
     ["x", "3,4;5", "a'b'c", "quoted", "double", "paren", "bracket", "hash", "100", "50", "a", "b"]),
    ("Copyright © 2005,2006 Acme® Inc, Widget™ ©©",  # the emoji of licence texts are tokens, as Lucene 9 makes them
     ["copyright", "©", "2005,2006", "acme", "®", "inc", "widget", "™", "©", "©"]),
])
def test_standard_tokenizer_word_boundaries(text, tokens):
    assert standard_tokens(text) == tokens


def test_long_tokens_are_cut_at_255_characters():
    assert [len(t) for t in standard_tokens("x" * 600)] == [255, 255, 90]


def test_ascii_fast_path_gives_the_general_patterns_tokens():
    """ASCII text takes a simpler pattern; on text made of letters, digits and every joiner it must cut the same
    tokens as the general UAX #29 pattern."""
    import random

    from fedmem.audit.mr import lucene

    def general(text):
        return [m.group().lower() for m in lucene._TOKEN.finditer(text) if m.group().strip("_")]

    rng = random.Random(0)
    alphabet = "abZ09_ :.,;'-\n!?\"()/"
    texts = ["".join(rng.choice(alphabet) for _ in range(120)) for _ in range(2000)]
    texts += ["U.S.A. 3.5 1,000 lord's a:b 1;2 x.y_z 12'34 __ _a_ end."]
    for text in texts:
        assert standard_tokens(text) == general(text), text
