"""Verbatim typing (SPEC §4.5): common word sequences of the aligned fragments (word-level common substrings).

Differences from the reference (``longest_common_substring_all``), all deliberate:

- Words are matched case-insensitively with the word regex of :mod:`.preprocess` over the original text, so
  offsets are the original ones; a span runs from the first word's first character to the last word's last
  character (the reference stretched the first and last word of each sentence to the sentence boundaries).
- A sequence is verbatim when it covers at least ``verbatim_minlen`` characters in both texts (the reference
  measured one side with ``>``; the cross-client paper asks for "at least 50 characters").
- Of two sequences with the same generated-side span only one is kept (the reference dropped both).
- The runs come from the word-equality matrix in a few numpy operations; above ``MAX_CELLS`` word pairs the
  dynamic programme runs one numpy row at a time instead (memory O(m)), so long fragments stay affordable.
"""

from __future__ import annotations

import numpy as np

from .preprocess import PreparedText


def _word_ids(keys: list[str], table: dict[str, int]) -> np.ndarray:
    out = np.empty(len(keys), dtype=np.int64)
    for k, key in enumerate(keys):
        wid = table.get(key)
        if wid is None:
            wid = table[key] = len(table)
        out[k] = wid
    return out


# Above this many word pairs the equality matrix is not built; the row-by-row programme runs instead.
MAX_CELLS = 4_000_000


def common_runs(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All maximal diagonal runs x[i:i+L] == y[j:j+L], as arrays (i, j, L)."""
    n, m = len(x), len(y)
    if 0 < n * m <= MAX_CELLS:
        return _common_runs_matrix(x, y)
    return _common_runs_rows(x, y)


def _common_runs_matrix(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The same runs from the whole equality matrix: along each diagonal the k-th run start pairs with the k-th
    run end, so sorting both by (diagonal, row) gives the runs without a loop."""
    eq = x[:, None] == y[None, :]
    before = np.zeros_like(eq)
    before[1:, 1:] = eq[:-1, :-1]
    after = np.zeros_like(eq)
    after[:-1, :-1] = eq[1:, 1:]
    si, sj = np.nonzero(eq & ~before)
    ei, ej = np.nonzero(eq & ~after)
    if len(si) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    s_order = np.lexsort((si, sj - si))
    e_order = np.lexsort((ei, ej - ei))
    i, j = si[s_order].astype(np.int64), sj[s_order].astype(np.int64)
    return i, j, ei[e_order].astype(np.int64) - i + 1


def _common_runs_rows(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n, m = len(x), len(y)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    lens: list[np.ndarray] = []
    if n and m:
        prev = np.zeros(m, dtype=np.int64)  # run length ending at (i - 1, j)
        eq_next = y == x[0]
        for i in range(n):
            eq = eq_next
            cur = np.zeros(m, dtype=np.int64)
            cur[0] = 1 if eq[0] else 0
            cur[1:] = np.where(eq[1:], prev[:-1] + 1, 0)
            # (i, j) ends a run unless (i + 1, j + 1) continues it.
            if i + 1 < n:
                eq_next = y == x[i + 1]
                ends = np.flatnonzero(eq & ~np.append(eq_next[1:], False))
            else:
                ends = np.flatnonzero(eq)
            if len(ends):
                length = cur[ends]
                rows.append(i - length + 1)
                cols.append(ends - length + 1)
                lens.append(length)
            prev = cur
    if not rows:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(lens)


def verbatim_spans(
    a: PreparedText, b: PreparedText, fragments: list[tuple[int, int, int, int]], minlen: int
) -> list[tuple[int, int, int, int]]:
    """Common word sequences of >= minlen characters (both sides) inside the given fragment pairs.

    ``fragments`` are (src_start, src_end, susp_start, susp_end) character spans; the result uses the same form
    with absolute offsets, sorted, with sequences whose generated-side span lies inside another one removed.
    """
    keys_a, starts_a, ends_a = a.words()
    keys_b, starts_b, ends_b = b.words()
    table: dict[str, int] = {}
    ids_a = _word_ids(keys_a, table)
    ids_b = _word_ids(keys_b, table)
    found: set[tuple[int, int, int, int]] = set()
    for s0, s1, t0, t1 in fragments:
        ia = np.flatnonzero((starts_a >= s0) & (ends_a <= s1))
        ib = np.flatnonzero((starts_b >= t0) & (ends_b <= t1))
        i, j, length = common_runs(ids_a[ia], ids_b[ib])
        if len(i) == 0:
            continue
        src0, src1 = starts_a[ia[i]], ends_a[ia[i + length - 1]]
        susp0, susp1 = starts_b[ib[j]], ends_b[ib[j + length - 1]]
        long_enough = np.flatnonzero((src1 - src0 >= minlen) & (susp1 - susp0 >= minlen))
        found.update(
            (int(src0[k]), int(src1[k]), int(susp0[k]), int(susp1[k])) for k in long_enough
        )
    # Drop sequences whose generated-side span lies inside an earlier (or equal) one.
    kept, max_end = [], -1
    for f in sorted(found, key=lambda f: (f[0], -f[1], f[2], f[3])):
        if f[1] <= max_end:
            continue
        kept.append(f)
        max_end = f[1]
    return kept
