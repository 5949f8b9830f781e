"""Steps 3-4 of SPEC §4 for one pair with seeds: extension (clustering + validation) and filtering.

Sentence indices are inclusive ranges; "src" is the generated text A, "susp" the training suffix B.

Differences from the reference code (Sanchez-Perez et al., PAN2014), all deliberate:

- Validation: the reference's ``validation()`` returns ``[]`` as soon as one re-clustering yields no cluster,
  which throws away every case already accepted in that call (and, at the top level, all cases of the pair).
  Here a case that fails validation at every gap down to 0 drops only itself; accepted cases are kept.
- Overlap resolution: the reference's bookkeeping (``remove_overlap3``) compares every case of an overlapping
  group only with the group's first case and can keep a case that lost to another one. Here the cases, sorted
  by their start on the suspicious side, are resolved as a pairwise tournament with the reference's quality
  score and tie rules: quality = mean best-match cosine over the shared suspicious sentences + (1 - that) x
  the same mean over the case's other suspicious sentences; when both qualities exceed 0.99 the case with
  more suspicious sentences wins; ties keep the earlier case.
- Clustering alternates sides with an explicit stack instead of recursion (same clusters, no depth limit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .preprocess import PreparedText
from .seeding import Seeds, pair_weights

SRC, SUSP = 0, 1


@dataclass
class AlignedCase:
    """A plagiarism case as inclusive sentence ranges, with the seeds that formed it and its validation cosine."""

    src_lo: int
    src_hi: int
    susp_lo: int
    susp_hi: int
    seeds: list[tuple[int, int]]
    cosine: float

    @property
    def n_susp(self) -> int:
        return self.susp_hi - self.susp_lo + 1


class PairSpace:
    """The tf-idf sentence vectors of one pair over the pair's vocabulary, as small dense matrices.

    A pair has a few dozen sentences and a few hundred terms, so dense arrays are cheaper than sparse ones: at
    this size building scipy objects costs more than the products themselves, for the vectors and for the cosine
    matrix alike. The sentence-by-sentence cosine matrix is computed once per pair, so every value is the same
    float whichever case asks.
    """

    def __init__(self, a: PreparedText, b: PreparedText):
        self.a, self.b = a, b
        wa, wb = pair_weights(a, b)
        vocab = np.union1d(a.terms, b.terms)
        col_a = np.searchsorted(vocab, a.entry_term)
        col_b = np.searchsorted(vocab, b.entry_term)
        self.WA = np.zeros((a.n, len(vocab)))
        self.WA[a.entry_sent, col_a] = wa  # (sentence, term) entries are unique
        self.WB = np.zeros((b.n, len(vocab)))
        self.WB[b.entry_sent, col_b] = wb
        na = np.sqrt(np.bincount(a.entry_sent, wa * wa, minlength=a.n))
        nb = np.sqrt(np.bincount(b.entry_sent, wb * wb, minlength=b.n))
        inv_na = np.divide(1.0, na, out=np.zeros_like(na), where=na > 0)
        inv_nb = np.divide(1.0, nb, out=np.zeros_like(nb), where=nb > 0)
        self.cos = self.WB @ self.WA.T  # (b.n, a.n)
        self.cos *= inv_nb[:, None]
        self.cos *= inv_na[None, :]

    def fragment_cosine(self, c: AlignedCase) -> float:
        """Cosine of the summed vectors of the two fragments (the validation measure)."""
        u = self.WA[c.src_lo : c.src_hi + 1].sum(axis=0)
        v = self.WB[c.susp_lo : c.susp_hi + 1].sum(axis=0)
        den = float(np.linalg.norm(u) * np.linalg.norm(v))
        return float(u @ v) / den if den > 0 else 0.0

    def best_match(self, c: AlignedCase) -> np.ndarray:
        """For each suspicious sentence of c, its highest cosine with a source sentence of c."""
        return self.cos[c.susp_lo : c.susp_hi + 1, c.src_lo : c.src_hi + 1].max(axis=1)


def _split(seeds: list[tuple[int, int]], side: int, gap: int) -> list[list[tuple[int, int]]]:
    """Sort seeds by one side and cut where consecutive indices are more than gap sentences apart."""
    ordered = sorted(seeds, key=lambda s: s[side])
    groups, current = [], [ordered[0]]
    for seed in ordered[1:]:
        if seed[side] - current[-1][side] - 1 <= gap:
            current.append(seed)
        else:
            groups.append(current)
            current = [seed]
    groups.append(current)
    return groups


def cluster(seeds: list[tuple[int, int]], src_gap: int, susp_gap: int) -> list[list[tuple[int, int]]]:
    """Clusters of seeds: split on the suspicious side, then alternate sides until a split changes nothing."""
    if not seeds:
        return []
    out = []
    stack = [(seeds, SUSP, 0)]
    while stack:
        group, side, depth = stack.pop()
        parts = _split(group, side, susp_gap if side == SUSP else src_gap)
        if len(parts) <= 1 and depth > 0:
            out.extend(parts)
            continue
        stack.extend((part, 1 - side, depth + 1) for part in reversed(parts))
    return out


def _bounding_case(group: list[tuple[int, int]]) -> AlignedCase:
    src = [s[SRC] for s in group]
    susp = [s[SUSP] for s in group]
    return AlignedCase(min(src), max(src), min(susp), max(susp), group, 0.0)


def extend(space: PairSpace, seeds: list[tuple[int, int]], src_gap: int, susp_gap: int, th3: float) -> list[AlignedCase]:
    """Extension: cluster the seeds and validate each cluster, re-clustering failures with smaller gaps."""
    out: list[AlignedCase] = []
    for group in cluster(seeds, src_gap, susp_gap):
        out.extend(_validate(space, group, src_gap, susp_gap, th3))
    return out


def _validate(space, group, src_gap, susp_gap, th3) -> list[AlignedCase]:
    case = _bounding_case(group)
    case.cosine = space.fragment_cosine(case)
    if case.cosine > th3:
        return [case]
    if src_gap > 0 and susp_gap > 0:
        out = []
        for sub in cluster(group, src_gap - 1, susp_gap - 1):
            out.extend(_validate(space, sub, src_gap - 1, susp_gap - 1, th3))
        return out
    return []


def _quality(space: PairSpace, x: AlignedCase, y: AlignedCase) -> float:
    best = space.best_match(x)
    idx = np.arange(x.susp_lo, x.susp_hi + 1)
    shared = (idx >= y.susp_lo) & (idx <= y.susp_hi)
    q = float(best[shared].mean())
    if (~shared).any():
        q += (1.0 - q) * float(best[~shared].mean())
    return q


def resolve_overlaps(space: PairSpace, cases: list[AlignedCase]) -> list[AlignedCase]:
    """Keep one case per overlap on the suspicious side, the one with the higher quality (see module doc)."""
    kept: list[AlignedCase] = []
    current = None
    for case in sorted(cases, key=lambda c: c.susp_lo):
        if current is None:
            current = case
            continue
        if case.susp_lo <= current.susp_hi:
            q_cur, q_new = _quality(space, current, case), _quality(space, case, current)
            if q_cur > 0.99 and q_new > 0.99:
                current = case if case.n_susp > current.n_susp else current
            elif q_new > q_cur:
                current = case
        else:
            kept.append(current)
            current = case
    if current is not None:
        kept.append(current)
    return kept


def char_span(text: PreparedText, lo: int, hi: int) -> tuple[int, int]:
    return int(text.spans[lo, 0]), int(text.spans[hi, 1])


def filter_cases(space: PairSpace, cases: list[AlignedCase], min_plaglen: int) -> list[AlignedCase]:
    """Filtering: overlap resolution, then cases shorter than min_plaglen characters on either side go."""
    out = []
    for c in resolve_overlaps(space, cases):
        s0, s1 = char_span(space.a, c.src_lo, c.src_hi)
        t0, t1 = char_span(space.b, c.susp_lo, c.susp_hi)
        if s1 - s0 >= min_plaglen and t1 - t0 >= min_plaglen:
            out.append(c)
    return out


def align(space: PairSpace, seeds: Seeds, src_gap: int, susp_gap: int, th3: float, min_plaglen: int) -> list[AlignedCase]:
    """Extension + filtering for one pair and one gap setting."""
    pairs = [(int(i), int(j)) for i, j in zip(seeds.src, seeds.susp)]
    return filter_cases(space, extend(space, pairs, src_gap, susp_gap, th3), min_plaglen)
