"""Shared passages by exact search (SPEC §3b): runs of words of at least 50 characters that the memorization texts
of two or more clients' training records, or the data's public share, hold.

A passage is shared wherever it occurs, whether or not retrieval would ever rank the text that holds it, so every
client's whole training split and the public share are searched, not the audit's sample of them. Texts are
compared as words (whitespace-separated, lower-cased), a run's length counted with single spaces between its words.

How: from every word of a text, the shortest run of words reaching ``min_chars`` characters is a *window*, and so is
the shortest run ending at every word. Two texts share a run of at least ``min_chars`` characters exactly when they
share a window (the window starting at the run's first word is the same words in both), and the windows a text
shares cover its shared runs: the windows starting inside a run cover all of it but its tail, and the window ending
at its last word covers the tail. Windows are compared by a hash of their words; the windows of the texts asked about
are collected first, so only those are kept while the corpus is scanned.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

MIN_CHARS = 50  # the detector's verbatim length (SPEC §4): the shortest run the reports call a passage
PUBLIC = -1  # the holder id of the public share

WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Passage:
    """A shared run inside one text: its character span there, the clients whose training records hold it and
    whether the public share does."""

    start: int
    end: int
    clients: tuple[int, ...]
    public: bool


def windows(text: str, min_chars: int = MIN_CHARS) -> list[tuple[int, int, int]]:
    """``(hash of the words, start, end)`` of every window of ``text`` (character offsets in ``text``); none in a
    text shorter than ``min_chars``."""
    spans = [(m.start(), m.end()) for m in WORD.finditer(text)]
    words = [text[a:b].lower() for a, b in spans]
    starts, ends, at = [], [], 0
    for w in words:  # positions in the text written with single spaces
        starts.append(at)
        ends.append(at + len(w))
        at += len(w) + 1
    runs = set()
    for i, s in enumerate(starts):  # the shortest run from word i
        j = bisect_left(ends, s + min_chars)
        if j < len(words):
            runs.add((i, j))
    for j, e in enumerate(ends):  # the shortest run to word j
        i = bisect_right(starts, e - min_chars) - 1
        if i >= 0:
            runs.add((i, j))
    return [(hash(" ".join(words[i:j + 1])), spans[i][0], spans[j][1]) for i, j in sorted(runs)]


def shared_passages(texts: list[tuple[int | None, str]], training: dict[int, Iterable[str]],
                    public: Iterable[str] = (), min_chars: int = MIN_CHARS) -> list[list[Passage]]:
    """The shared passages of each ``(owner client, text)``: merged runs that the training records of two or more
    clients hold (the owner counted as a holder) or the public share holds. ``training``: each client's training
    memorization texts, all of them."""
    per_text = [windows(text, min_chars) for _, text in texts]
    holders: dict[int, set[int]] = {key: set() for wins in per_text for key, _, _ in wins}
    for client, corpus in [*training.items(), (PUBLIC, public)]:
        for text in corpus:
            for key, _, _ in windows(text, min_chars):
                if key in holders:
                    holders[key].add(client)
    out = []
    for (owner, _), wins in zip(texts, per_text):
        found = []
        for key, a, b in wins:
            who = holders[key] | ({owner} if owner is not None else set())
            if PUBLIC in who or len(who) >= 2:
                found.append((a, b, who))
        out.append(_merged(found))
    return out


def _merged(found: list[tuple[int, int, set[int]]]) -> list[Passage]:
    """Overlapping windows merged into passages, each with the union of its windows' holders."""
    out: list[list] = []
    for a, b, who in sorted(found, key=lambda f: (f[0], f[1])):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
            out[-1][2] |= who
        else:
            out.append([a, b, set(who)])
    return [Passage(a, b, tuple(sorted(c for c in who if c != PUBLIC)), PUBLIC in who) for a, b, who in out]
