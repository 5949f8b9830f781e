"""Which client a row belongs to under a natural partition.

A client group is a rule over the row's client-column value: ``any`` (at least one of), ``all`` (every one of),
``none`` (none of). Two ways to read the value:

- ``tags``: the value is a set of tags: a list such as PubMedQA's MeSH terms, or a category string such as
  arXiv's ``"astro-ph.GA hep-th"`` split on ``tag_separator``. A rule value matches a tag equal to it or below
  it in a dotted hierarchy (``astro-ph`` matches ``astro-ph.GA``). Matching ignores case.
- ``keywords``: the value is free text; a keyword matches on word boundaries, ignoring case. The row goes to
  the group with the most distinct keyword hits.

A row that matches no group, or more than one (ties, for keywords), is left out: the paper's client groups are
disjoint, and an ambiguous row would blur them. The loader reports how many rows were left out.
"""

from __future__ import annotations

import re
from typing import Any

from fedmem.data.templates import one_line


def tags_of(value: Any, separator: str | None = None) -> set[str]:
    """Lower-cased tags of a value: the elements of a list (nested lists flattened), or the value itself; with
    ``separator`` every element is further split on it (``" "`` splits arXiv's ``"astro-ph.GA hep-th"``; MeSH
    terms such as ``"Middle Aged"`` must stay whole, so PubMedQA uses no separator)."""
    if value is None:
        return set()
    items = value if isinstance(value, (list, tuple)) else [value]
    out: set[str] = set()
    for item in items:
        if isinstance(item, (list, tuple)):
            out |= tags_of(item, separator)
            continue
        s = " ".join(str(item).split()).lower()
        pieces = s.split(separator.lower() if separator and separator.strip() else None) if separator else [s]
        out.update(p.strip() for p in pieces if p.strip())
    return out


def _has(tags: set[str], value: str) -> bool:
    """``value`` is one of the tags, or a parent of one in a dotted hierarchy (``astro-ph`` or ``astro-ph.``
    covers arXiv's ``astro-ph.GA``)."""
    v = value.lower()
    if v in tags:
        return True
    stem = v if v.endswith(".") else v + "."
    return any(t.startswith(stem) for t in tags)


def _tag_match(tags: set[str], rule: dict[str, list[str]]) -> bool:
    any_, all_, none = rule.get("any", []), rule.get("all", []), rule.get("none", [])
    return ((not any_ or any(_has(tags, v) for v in any_)) and all(_has(tags, v) for v in all_)
            and not any(_has(tags, v) for v in none))


def _keyword_pattern(words: list[str]) -> re.Pattern | None:
    if not words:
        return None
    alts = sorted({re.escape(" ".join(w.lower().split())) for w in words}, key=len, reverse=True)
    return re.compile(r"(?<!\w)(" + "|".join(alts) + r")(?!\w)")


def assign_groups(values: list[Any], groups: dict[str, dict[str, list[str]]], group_by: str,
                  tag_separator: str | None = None) -> list[int | None]:
    """Group index (in ``groups`` order) for every value, or None when it matches no group or several."""
    rules = list(groups.values())
    out: list[int | None] = []
    if group_by == "tags":
        for v in values:
            tags = tags_of(v, tag_separator)
            hits = [g for g, rule in enumerate(rules) if _tag_match(tags, rule)]
            out.append(hits[0] if len(hits) == 1 else None)
        return out
    if group_by != "keywords":
        raise ValueError(f"group_by must be tags or keywords, got {group_by!r}")
    compiled = [(_keyword_pattern(r.get("any", [])), [_keyword_pattern([w]) for w in r.get("all", [])],
                 _keyword_pattern(r.get("none", []))) for r in rules]
    for v in values:
        text = one_line(v).lower()
        scores = []
        for any_p, all_ps, none_p in compiled:
            if none_p is not None and none_p.search(text):
                scores.append(0)
                continue
            if not all(p.search(text) for p in all_ps):
                scores.append(0)
                continue
            hits = len(set(any_p.findall(text))) if any_p is not None else 0
            if any_p is not None and hits == 0:
                scores.append(0)
                continue
            scores.append(hits + len(all_ps))
        best = max(scores) if scores else 0
        out.append(scores.index(best) if best > 0 and scores.count(best) == 1 else None)
    return out
