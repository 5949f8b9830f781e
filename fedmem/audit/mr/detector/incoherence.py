"""The incoherence filter of SPEC §3 (cross-client paper App. H.2).

A generation in which some three-word sequence occurs at least ten times is incoherent: PAN2014 tends to type
such degenerate text as idea-level memorization, so the MR audit drops it and reports how many it dropped.
Words are the lowercased alphanumeric runs of the text (punctuation ignored); occurrences may overlap.
"""

from __future__ import annotations

import re
from collections import Counter

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")


def is_incoherent(text: str, n: int = 3, min_repeats: int = 10) -> bool:
    """True if some n-word sequence occurs at least min_repeats times in text."""
    if n < 1 or min_repeats < 1:
        raise ValueError(f"is_incoherent needs n >= 1 and min_repeats >= 1, got n={n}, min_repeats={min_repeats}")
    words = [w.lower() for w in _WORD.findall(text)]
    if len(words) < n + min_repeats - 1:
        return False
    counts = Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    return max(counts.values()) >= min_repeats
