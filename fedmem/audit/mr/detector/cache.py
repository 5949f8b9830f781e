"""A bounded memo for the detector's per-item work (a text's sentences, a sentence's entities or embedding).

An audit run types the same suffixes in every chunk and every round, so each item is computed once and kept; the
memo is emptied when it passes ``CACHE_ENTRIES`` items, which bounds memory over a long run.
"""

from __future__ import annotations

from typing import Callable, Hashable, Iterable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

CACHE_ENTRIES = 200_000


def memoized(cache: dict[K, V], keys: Iterable[K], compute: Callable[[list[K]], Iterable[V]]) -> list[K]:
    """Fill ``cache`` for every key of ``keys`` not in it, with one ``compute(missing keys)`` call (in first-seen
    order); returns the missing keys (what was computed)."""
    wanted = list(dict.fromkeys(keys))
    if len(cache) + len(wanted) > CACHE_ENTRIES:
        cache.clear()
    missing = [k for k in wanted if k not in cache]
    if missing:
        cache.update(zip(missing, compute(missing)))
    return missing
