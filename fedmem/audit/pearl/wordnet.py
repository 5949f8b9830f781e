"""A small offline reader of the WordNet 3.0 database files, for PEARL's synonym perturbation.

Why not NLTK's ``WordNetCorpusReader``: NLTK's corpus data cannot be downloaded here, and Debian's
``wordnet-base`` package (which installs the WordNet 3.0 ``index.*`` / ``data.*`` files under
/usr/share/wordnet) lacks the ``lexnames`` file that NLTK's reader opens in its constructor; NLTK also
scans all adjective satellites and builds the whole lemma map up front. Synonym lookup needs only two file
formats (wndb(5WN)), so this reader parses them itself, lazily per part of speech:

- ``index.<pos>``: ``lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt offset...``, the
  synset offsets in WordNet's sense order (most frequent sense first);
- ``data.<pos>``: the line at byte ``offset`` is ``offset lex_filenum ss_type w_cnt(hex) word lex_id ...``.
"""

from __future__ import annotations

import os
from pathlib import Path

# Where a WordNet 3.0 dictionary usually lives: Debian/Ubuntu `wordnet-base`, then a few other layouts.
DEFAULT_WORDNET_DIRS = (
    "/usr/share/wordnet",
    "/usr/local/share/wordnet",
    "/usr/share/wordnet/dict",
    "/usr/local/WordNet-3.0/dict",
)
WORDNET_ENV = "FEDMEM_WORDNET"
POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}


class WordNetMissing(FileNotFoundError):
    """No WordNet dictionary at the configured or default locations."""


def find_wordnet_dir(path: str | None = None) -> Path:
    """The directory holding ``index.noun``/``data.noun``...: ``path`` if given, else $FEDMEM_WORDNET, else the
    usual system locations. Raises :class:`WordNetMissing` with the places looked at and how to fix it."""
    candidates = [path] if path else [os.environ.get(WORDNET_ENV), *DEFAULT_WORDNET_DIRS]
    looked = []
    for c in candidates:
        if not c:
            continue
        looked.append(c)
        d = Path(c)
        if all((d / f"{kind}.{name}").is_file() for name in POS_FILES.values() for kind in ("index", "data")):
            return d
    raise WordNetMissing(
        "the synonym perturbation needs a WordNet 3.0 dictionary (index.noun, data.noun, ... for noun, verb, adj, "
        f"adv) and found none in {looked}. Install it with `apt-get install wordnet-base` (Debian/Ubuntu, "
        f"puts it in /usr/share/wordnet), or point audit.pearl.wordnet_dir (or ${WORDNET_ENV}) at a WordNet "
        "3.0 dict/ folder, or use audit.pearl.perturbation=bitflip"
    )


class WordNet:
    """Synonyms from a WordNet 3.0 dictionary folder. Files are read on first use of each part of speech."""

    def __init__(self, path: str | None = None):
        self.dir = find_wordnet_dir(path)
        self._index: dict[str, dict[str, list[int]]] = {}
        self._data: dict[str, bytes] = {}

    def _load(self, pos: str) -> None:
        name = POS_FILES[pos]
        index: dict[str, list[int]] = {}
        with open(self.dir / f"index.{name}", encoding="utf-8") as f:
            for line in f:
                if line.startswith("  "):  # the licence header lines start with two spaces
                    continue
                parts = line.split()
                p_cnt = int(parts[3])
                sense_cnt = int(parts[4 + p_cnt])
                offsets = parts[6 + p_cnt : 6 + p_cnt + sense_cnt]
                index[parts[0]] = [int(o) for o in offsets]
        self._index[pos] = index
        self._data[pos] = (self.dir / f"data.{name}").read_bytes()

    def synsets(self, lemma: str, pos: str) -> list[list[str]]:
        """The synsets of ``lemma`` as ``pos`` (n, v, a, r), in sense order; each a list of its words with
        spaces for WordNet's underscores and adjective markers such as ``(a)`` removed."""
        if pos not in POS_FILES:
            raise ValueError(f"WordNet part of speech must be one of {sorted(POS_FILES)}, got {pos!r}")
        if pos not in self._index:
            self._load(pos)
        data = self._data[pos]
        out = []
        for offset in self._index[pos].get(lemma.lower().replace(" ", "_"), []):
            end = data.index(b"\n", offset)
            fields = data[offset:end].decode("utf-8").split()
            w_cnt = int(fields[3], 16)
            words = fields[4 : 4 + 2 * w_cnt : 2]
            out.append([w.split("(")[0].replace("_", " ") for w in words])
        return out

    def synonyms(self, lemma: str, pos: str, senses: int = 1) -> list[str]:
        """Other single words of the first ``senses`` senses of ``lemma`` (most frequent first), in WordNet's
        order. Only the leading sense by default, so a replacement keeps the word's usual meaning (PEARL assumes
        synonym swaps preserve semantics; a later sense turns "dog" into "frump"). Multi-word and
        non-alphabetic entries are skipped so that one word replaces one word."""
        own = lemma.lower()
        found: list[str] = []
        for words in self.synsets(lemma, pos)[:senses]:
            for w in words:
                if w.isalpha() and w.lower() != own and w.lower() not in {f.lower() for f in found}:
                    found.append(w)
        return found
