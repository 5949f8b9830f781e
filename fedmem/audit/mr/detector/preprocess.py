"""Step 1 of SPEC §4: sentences, terms and word tokens of one text, computed once per distinct text.

Differences from the reference (Sanchez-Perez et al.'s PAN2014 code), all deliberate:

- Sentences come from a data-free regular-expression splitter (NLTK's punkt model cannot be downloaded here).
  A sentence ends at ``.``, ``!`` or ``?`` (plus closing quotes/brackets) followed by white space, unless the
  word before a ``.`` is a known abbreviation or a single letter (an initial); blank lines also end a sentence.
- Words come from a regular expression that mimics the parts of NLTK's Treebank tokenizer that survive the
  reference's filter (tokens that start alphanumeric and are longer than 2 characters): hyphenated words,
  decimals, ``1,000`` and ``u.s`` stay one token, ``n't`` is split off as Treebank does, and the clitics
  ``'s 're 've 'll 'd 'm`` are dropped (Treebank splits them off and the filter drops them). One regular
  expression is much faster than the Treebank tokenizer and gives the tokens the filter would keep.
- Joining a short sentence to the next one keeps the true character span (start of the first to end of the
  second); the reference adds the two lengths and so loses the gap between them.
- ``rem_sw=True`` removes NLTK's English stopwords; the reference only skipped stemming them.

Stemming is Snowball English (PyStemmer), as in the reference.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

# NLTK's English stopword list (the reference inlines the same list); only used with rem_sw=True.
STOPWORDS = frozenset(
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers "
    "herself it its itself they them their theirs themselves what which who whom this that these those am is are "
    "was were be been being have has had having do does did doing a an the and but if or because as until while "
    "of at by for with about against between into through during before after above below to from up down in out "
    "on off over under again further then once here there when where why how all any both each few more most "
    "other some such no nor not only own same so than too very s t can will just don should now".split()
)

# Words before a period that do not end a sentence.
ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt vs etc e.g i.e al fig figs eq eqs vol pp approx dept inc ltd co corp "
    "jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k a.m p.m ph.d m.d cf ca resp".split()
)

_SENTENCE_END = re.compile(r"[.!?]+[\"'\u2019\u201d)\]]*(?=\s)|\n[ \t\r\f\v]*\n")
_WORD_BEFORE = re.compile(r"([^\W_](?:[\w.]*[^\W_])?)\.+$")
# A word: starts alphanumeric, continues with word characters or with ' - . / joining two alphanumerics, or a
# comma between digits (1,000).
_WORD = re.compile(r"[^\W_](?:\w|['\u2019\-./](?=[^\W_])|(?<=\d),(?=\d))*")
_CLITIC = re.compile(r"^(.+?)['\u2019](?:s|re|ve|ll|d|m)$")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text``, trimmed of surrounding white space, empty ones left out."""
    spans = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        end = match.end()
        if match.group(0)[0] == ".":
            before = _WORD_BEFORE.search(text, max(start, match.start() - 64), match.start() + 1)
            if before is not None:
                word = before.group(1).lower()
                if word in ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
                    continue
        spans.append((start, end))
        start = end
    spans.append((start, len(text)))
    out = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))
    return out


def term_tokens(sentence: str) -> list[str]:
    """Lowercased tokens of a sentence as the reference keeps them: start alphanumeric, longer than 2 chars."""
    out = []
    for token in _WORD.findall(sentence.lower()):
        if "'" in token or "\u2019" in token:
            if token.endswith(("n't", "n\u2019t")) and len(token) > 3:
                out.append(token[:-3])
                token = "n't"
            else:
                clitic = _CLITIC.match(token)
                if clitic is not None:
                    token = clitic.group(1)
        if len(token) > 2:
            out.append(token)
    return out


class Stemmer:
    """Snowball English stemmer with a word cache (PyStemmer also caches, this saves the call)."""

    def __init__(self):
        import Stemmer as pystemmer  # PyStemmer

        self._stemmer = pystemmer.Stemmer("english")
        self._cache: dict[str, str] = {}

    def stem(self, words: list[str]) -> list[str]:
        cache = self._cache
        missing = [w for w in words if w not in cache]
        if missing:
            for word, stem in zip(missing, self._stemmer.stemWords(missing)):
                cache[word] = stem
            if len(cache) > 500_000:  # bounded memory over a long audit
                cache.clear()
        return [cache[w] for w in words]


@dataclass
class PreparedText:
    """One text after preprocessing. Sentence i covers ``text[spans[i, 0]:spans[i, 1]]``.

    The sparse term-frequency matrix is stored as entries sorted by (sentence, term id): ``entry_sent``,
    ``entry_term``, ``entry_tf``; ``entry_df`` is the sentence frequency of the entry's term in this text.
    Term ids come from :func:`vectorize`, which numbers the stems of a batch in lexicographic order, so every
    sum over terms runs in the same order whatever the batch holds (bit-identical results for a pair).
    """

    text: str
    spans: np.ndarray  # (n, 2) int64
    entry_sent: np.ndarray  # int64
    entry_term: np.ndarray  # int64
    entry_tf: np.ndarray  # float64
    entry_df: np.ndarray  # float64
    sent_nterms: np.ndarray  # (n,) distinct terms per sentence (for Dice)
    terms: np.ndarray  # sorted distinct term ids of the text
    term_df: np.ndarray  # their sentence frequencies
    _words: tuple | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        return len(self.spans)

    def sentence(self, i: int) -> str:
        return self.text[self.spans[i, 0] : self.spans[i, 1]]

    def words(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Word keys (lowercased) with start and end offsets, for the verbatim test; computed on first use."""
        if self._words is None:
            keys, starts, ends = [], [], []
            for m in _WORD.finditer(self.text):
                keys.append(m.group(0).lower())
                starts.append(m.start())
                ends.append(m.end())
            self._words = (keys, np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))
        return self._words


@dataclass
class TextUnits:
    """A text split into (joined) sentences with their stemmed terms, before numbering the terms."""

    text: str
    spans: list[tuple[int, int]]
    stems: list[list[str]]


class Preprocessor:
    """Sentences and stemmed terms of a text (:meth:`units`); :func:`vectorize` turns a batch into matrices."""

    def __init__(self, min_sentlen: int = 3, rem_sw: bool = False):
        self.min_sentlen = min_sentlen
        self.rem_sw = rem_sw
        self.stemmer = Stemmer()

    def units(self, text: str) -> TextUnits:
        text = text.replace("\x00", " ")
        sentences: list[tuple[int, int, list[str]]] = []
        for s, e in split_sentences(text):
            tokens = term_tokens(text[s:e])
            if self.rem_sw:
                tokens = [t for t in tokens if t not in STOPWORDS]
            if tokens:  # the reference drops sentences without any kept token
                sentences.append((s, e, self.stemmer.stem(tokens)))
        sentences = self._join_short(sentences)
        return TextUnits(text, [(s, e) for s, e, _ in sentences], [stems for _, _, stems in sentences])

    def _join_short(self, sentences: list[tuple[int, int, list[str]]]) -> list[tuple[int, int, list[str]]]:
        """Join every sentence with fewer than min_sentlen tokens to the next one (the last one stays)."""
        out: list[tuple[int, int, list[str]]] = []
        pending: tuple[int, list[str]] | None = None
        for k, (s, e, stems) in enumerate(sentences):
            if pending is not None:
                s, stems = pending[0], pending[1] + stems
                pending = None
            if len(stems) < self.min_sentlen and k < len(sentences) - 1:
                pending = (s, stems)
            else:
                out.append((s, e, stems))
        return out


def vectorize(batch: list[TextUnits]) -> list[PreparedText]:
    """Term-frequency matrices of a batch of texts over one vocabulary numbered in lexicographic stem order."""
    vocab = {stem: k for k, stem in enumerate(sorted({s for u in batch for sent in u.stems for s in sent}))}
    return [_vectorize_one(u, vocab) for u in batch]


def _vectorize_one(units: TextUnits, vocab: dict[str, int]) -> PreparedText:
    n = len(units.spans)
    ent_sent: list[int] = []
    ent_term: list[int] = []
    ent_tf: list[int] = []
    nterms = np.zeros(n, dtype=np.int64)
    for i, stems in enumerate(units.stems):
        counts: dict[int, int] = {}
        for stem in stems:
            tid = vocab[stem]
            counts[tid] = counts.get(tid, 0) + 1
        for tid in sorted(counts):
            ent_sent.append(i)
            ent_term.append(tid)
            ent_tf.append(counts[tid])
        nterms[i] = len(counts)
    entry_term = np.asarray(ent_term, dtype=np.int64)
    terms, inverse, df = np.unique(entry_term, return_inverse=True, return_counts=True)
    return PreparedText(
        text=units.text,
        spans=np.asarray(units.spans, dtype=np.int64).reshape(n, 2),
        entry_sent=np.asarray(ent_sent, dtype=np.int64),
        entry_term=entry_term,
        entry_tf=np.asarray(ent_tf, dtype=np.float64),
        entry_df=df[inverse].astype(np.float64),
        sent_nterms=nterms,
        terms=terms.astype(np.int64),
        term_df=df.astype(np.float64),
    )
