"""What Lucene 9 (the engine inside Elasticsearch) does to a text field, reproduced so that an embedded index ranks
exactly as Elasticsearch does: the ``standard`` analyzer's tokens, the one-byte length norm, and BM25's float32
arithmetic.

- Tokens: the ``standard`` tokenizer splits at Unicode word boundaries (UAX #29): "lord's", "U.S.A", "3.5" and
  "1,000" stay one token each, a hyphen splits, a run of letters and digits is one token, an underscore joins; a
  Han ideograph or a Hiragana character is a token of its own, a Katakana run is one token. Tokens are lowercased
  and cut into pieces of at most 255 characters; a run of underscores alone is no token, nor are superscripts,
  fractions and other non-decimal numbers. Differences that remain, rare in English text: letters are
  Python's (``str.isalpha``) rather than Unicode's Word_Break classes (combining marks end a token here; Hebrew
  and Thai rules are not modelled, nor emoji beyond ©, ® and ™, each a token of its own as Lucene's emoji rule
  makes them), and lowercasing is Python's ``str.lower``, not Java's per-code-point one.
- Length norm: a document's length (its number of tokens) is stored in one byte (``SmallFloat.intToByte4``):
  exact below 24, rounded down to four significant bits beyond; BM25 uses the decoded length.
- Scoring (``BM25Similarity``): idf = ln(1 + (N − n + 0.5) / (n + 0.5)) as a float; avgdl = total tokens / docs
  with the field, as a float; for each of the 256 norms a float32 1 / (k1 · (1 − b + b · dl / avgdl)); a term
  scores w − w / (1 + tf · that) in float32 with w = idf. A ``match`` query is one SHOULD clause per query token
  (a repeated token counts again); the clauses' scores are summed in double and the sum is cast to float.
  Ties rank by document order.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
from scipy import sparse

MAX_TOKEN_LENGTH = 255

# UAX #29 word-break classes that join two letters (MidLetter, MidNumLet, Single_Quote) or two digits (MidNum,
# MidNumLet, Single_Quote) into one token.
_MID_LETTER = ":\u00b7\u0387\u05f4\u2027\ufe13\ufe55\uff1a"
_MID_NUM_LET = ".\u2018\u2019\u2024\ufe52\uff07\uff0e'"
_MID_NUM = ",;\u037e\u0589\u060c\u060d\u066c\u07f8\u2044\ufe10\ufe14\ufe50\ufe54\uff0c\uff1b"
_SINGLE = "\u3040-\u309f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"  # Hiragana, Han: one each
# the emoji English prose carries (copyright, registered, trade mark): Lucene's emoji rule makes each a token
_TEXT_EMOJI = "\u00a9\u00ae\u2122"
_KATAKANA = "\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
# Python's \w also takes "other numbers" (superscripts, fractions, circled digits), which are no word characters
# in UAX #29
_OTHER_NUMBERS = re.escape("".join(chr(c) for c in range(0x30000) if unicodedata.category(chr(c)) == "No"))
_LETTER = rf"(?:(?![{_SINGLE}{_KATAKANA}{_OTHER_NUMBERS}])[^\W\d_])"
_WORD_PART = rf"(?:{_LETTER}|\d|_)+"
_TOKEN = re.compile(
    rf"[{_SINGLE}{_TEXT_EMOJI}]|[{_KATAKANA}]+"
    rf"|{_WORD_PART}(?:(?:(?<={_LETTER})[{re.escape(_MID_LETTER + _MID_NUM_LET)}](?={_LETTER})"
    rf"|(?<=\d)[{re.escape(_MID_NUM + _MID_NUM_LET)}](?=\d)){_WORD_PART})*"
)


# The same pattern for ASCII text, where a letter is [A-Za-z], a digit [0-9], and the only joiners are ":" between
# letters, "," and ";" between digits and "." and "'" between either: much faster, same tokens (tested).
_ASCII_TOKEN = re.compile(
    r"[A-Za-z0-9_]+(?:(?:(?<=[A-Za-z])[:.'](?=[A-Za-z])|(?<=[0-9])[,;.'](?=[0-9]))[A-Za-z0-9_]+)*")


def standard_tokens(text: str) -> list[str]:
    """The ``standard`` analyzer's tokens of ``text``: UAX #29 words, lowercased, at most 255 characters each."""
    out = []
    for m in (_ASCII_TOKEN if text.isascii() else _TOKEN).finditer(text):
        token = m.group().lower()
        if token.strip("_") == "":
            continue  # a segment of underscores alone is no word (Lucene emits words with a letter or digit)
        out.extend(token[i : i + MAX_TOKEN_LENGTH] for i in range(0, len(token), MAX_TOKEN_LENGTH))
    return out


# ---------------------------------------------------------------- SmallFloat's 4-bit-mantissa byte


def _long_to_int4(i: int) -> int:
    """A non-negative integer as 4 bits of mantissa (the leading one implicit) and 4 bits of shift."""
    bits = i.bit_length()
    if bits < 4:
        return i  # subnormal: stored as is
    shift = bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    bits, shift = i & 0x07, (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_MAX_INT4 = _long_to_int4(2**31 - 1)
_NUM_FREE_VALUES = 255 - _MAX_INT4  # lengths below this are stored exactly


def int_to_byte4(i: int) -> int:
    """``SmallFloat.intToByte4``: the one-byte code of a length (exact below 24, then rounded down)."""
    if i < 0:
        raise ValueError(f"a length cannot be negative, got {i}")
    return i if i < _NUM_FREE_VALUES else _NUM_FREE_VALUES + _long_to_int4(i - _NUM_FREE_VALUES)


def byte4_to_int(b: int) -> int:
    """``SmallFloat.byte4ToInt``: the length a one-byte code stands for."""
    if b < _NUM_FREE_VALUES:
        return b
    return min(_NUM_FREE_VALUES + _int4_to_long(b - _NUM_FREE_VALUES), 2**31 - 1)


LENGTH_TABLE = np.array([byte4_to_int(b) for b in range(256)], dtype=np.float32)


# ---------------------------------------------------------------- BM25


def idf(doc_freq: np.ndarray, doc_count: int) -> np.ndarray:
    """float32 ln(1 + (N − n + 0.5) / (n + 0.5)), computed in double as Lucene does."""
    n = np.asarray(doc_freq, dtype=np.float64)
    return np.log(1 + (doc_count - n + 0.5) / (n + 0.5)).astype(np.float32)


def norm_inverses(avgdl: np.float32, k1: float, b: float) -> np.ndarray:
    """The 256 float32 factors 1 / (k1 · ((1 − b) + b · dl / avgdl)), one per length code, in float32 steps."""
    k1, b, one = np.float32(k1), np.float32(b), np.float32(1)
    return one / (k1 * ((one - b) + b * LENGTH_TABLE / np.float32(avgdl)))


class Bm25Matrix:
    """Every (term, document) score contribution of one field, precomputed: a query's scores are then one sparse
    product (query-token counts x contributions) summed in double, as Lucene's disjunction sums them."""

    def __init__(self, docs: list[list[str]], k1: float = 1.2, b: float = 0.75):
        self.vocab: dict[str, int] = {}
        rows, cols, tfs = [], [], []
        for d, tokens in enumerate(docs):
            counts: dict[int, int] = {}
            for t in tokens:
                j = self.vocab.setdefault(t, len(self.vocab))
                counts[j] = counts.get(j, 0) + 1
            rows.extend(counts)
            cols.extend([d] * len(counts))
            tfs.extend(counts.values())
        self.n_docs = len(docs)
        lengths = np.array([len(t) for t in docs], dtype=np.int64)
        with_field = int((lengths > 0).sum())
        avgdl = np.float32(lengths.sum() / with_field) if with_field else np.float32(1)
        norm_inv = norm_inverses(avgdl, k1, b)[[int_to_byte4(int(n)) for n in lengths]]
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        tfs = np.asarray(tfs, dtype=np.float32)
        doc_freq = np.bincount(rows, minlength=len(self.vocab))
        w = idf(doc_freq, with_field)[rows]
        one = np.float32(1)
        contribution = w - w / (one + tfs * norm_inv[cols])  # float32, as BM25Scorer.score
        self.scores = sparse.csr_matrix((contribution.astype(np.float64), (rows, cols)),
                                        shape=(len(self.vocab), self.n_docs))

    def search(self, queries: list[list[str]], k: int, chunk: int = 512) -> list[list[tuple[int, float]]]:
        """Top-k (document, score) of each query's tokens, by score, ties by document order."""
        out: list[list[tuple[int, float]]] = []
        for lo in range(0, len(queries), chunk):
            out.extend(self._search_chunk(queries[lo : lo + chunk], k))
        return out

    def _search_chunk(self, queries: list[list[str]], k: int) -> list[list[tuple[int, float]]]:
        q_rows, q_cols = [], []
        for i, tokens in enumerate(queries):
            for t in tokens:
                if t in self.vocab:
                    q_rows.append(i)
                    q_cols.append(self.vocab[t])
        counts = sparse.csr_matrix((np.ones(len(q_rows)), (q_rows, q_cols)), shape=(len(queries), len(self.vocab)))
        scores = (counts @ self.scores).toarray().astype(np.float32)  # double sums cast to float, as Lucene
        k = min(k, self.n_docs)
        if k == 0:
            return [[] for _ in queries]
        # One sortable key per (query, document): a non-negative float32's bits order like its value; below them
        # the inverted document number, so that equal scores rank by document order.
        key = (scores.view(np.uint32).astype(np.uint64) << np.uint64(32)) | (
            np.uint64(0xFFFFFFFF) - np.arange(self.n_docs, dtype=np.uint64))
        top = np.argpartition(key, self.n_docs - k, axis=1)[:, self.n_docs - k :]
        order = np.argsort(np.take_along_axis(key, top, axis=1), axis=1)[:, ::-1]  # best first
        top = np.take_along_axis(top, order, axis=1)
        best = np.take_along_axis(scores, top, axis=1)
        return [[(int(d), float(x)) for d, x in zip(row_docs, row_scores) if x > 0]
                for row_docs, row_scores in zip(top, best)]
