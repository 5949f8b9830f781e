"""Step 2 of SPEC §4, vectorized over many pairs at once: tf-idf sentence vectors and seeds.

For a pair (A = generated text, B = suffix) the tf-idf weight of term t in a sentence is tf x ln(N / df(t)),
N = number of sentences of A and B, df(t) = sentence frequency of t in A plus in B. A seed is a sentence pair
with cosine > th1 and Dice coefficient of the term sets > th2.

All pairs of a batch are handled together with a fixed number of numpy operations: every (pair, term) entry of
A is joined with the entries of B by sorting on a (pair, term) key, and the products of the joined weights are
summed per sentence pair with ``bincount``. Only sentence pairs that share a term are ever materialised, so a
pair without any shared term costs nothing beyond its share of the joins (the fast path that lets most pairs
of an MR audit exit early). Each sentence pair's sums are formed in the same order whatever else is in the
batch, so the seeds of a pair do not depend on the batch composition or order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .preprocess import PreparedText

# Upper bound on joined (A entry, B entry) products handled in one vectorized step (~50 bytes each).
MAX_PRODUCTS = 2_000_000


@dataclass
class Seeds:
    """Seeds of one pair: sentence indices in A (src) and B (susp) with their cosine and Dice values."""

    src: np.ndarray
    susp: np.ndarray
    cosine: np.ndarray
    dice: np.ndarray

    def __len__(self) -> int:
        return len(self.src)


EMPTY_SEEDS = Seeds(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0))


def pair_weights(a: PreparedText, b: PreparedText) -> tuple[np.ndarray, np.ndarray]:
    """tf-idf weights of the entries of a and of b within the pair (a, b) (the per-pair form of the above)."""
    return _weights_one(a, b), _weights_one(b, a)


def _weights_one(x: PreparedText, y: PreparedText) -> np.ndarray:
    if len(x.entry_term) == 0:
        return np.zeros(0)
    df_other = _lookup(y.terms, y.term_df, x.entry_term)
    return x.entry_tf * np.log((x.n + y.n) / (x.entry_df + df_other))


def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """values[k] where keys[k] == query (keys sorted, unique), 0 where the query is absent."""
    if len(keys) == 0:
        return np.zeros(len(query))
    pos = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    return np.where(keys[pos] == query, values[pos], 0.0)


class _Side:
    """The entries of one side (all A texts or all B texts) of a batch of pairs, concatenated in pair order."""

    def __init__(self, texts: list[PreparedText]):
        self.n_sent = np.array([t.n for t in texts], dtype=np.int64)
        self.row_base = np.concatenate([[0], np.cumsum(self.n_sent)[:-1]]).astype(np.int64)
        n_ent = np.array([len(t.entry_term) for t in texts], dtype=np.int64)
        self.ent_base = np.concatenate([[0], np.cumsum(n_ent)]).astype(np.int64)
        self.pair = np.repeat(np.arange(len(texts), dtype=np.int64), n_ent)
        self.sent = _cat([t.entry_sent for t in texts], np.int64)
        self.term = _cat([t.entry_term for t in texts], np.int64)
        self.tf = _cat([t.entry_tf for t in texts], np.float64)
        self.df = _cat([t.entry_df for t in texts], np.float64)
        self.nterms = _cat([t.sent_nterms for t in texts], np.int64)
        n_terms = np.array([len(t.terms) for t in texts], dtype=np.int64)
        self.uterm_pair = np.repeat(np.arange(len(texts), dtype=np.int64), n_terms)
        self.uterm = _cat([t.terms for t in texts], np.int64)
        self.uterm_df = _cat([t.term_df for t in texts], np.float64)


def _cat(arrays: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(arrays).astype(dtype, copy=False) if arrays else np.zeros(0, dtype)


def batch_seeds(pairs: list[tuple[PreparedText, PreparedText]], th1: float, th2: float) -> list[Seeds]:
    """Seeds of every pair (A = generated, B = suffix)."""
    out = [EMPTY_SEEDS] * len(pairs)
    if not pairs:
        return out
    A = _Side([a for a, _ in pairs])
    B = _Side([b for _, b in pairs])
    width = int(max(A.term.max(initial=0), B.term.max(initial=0))) + 1
    n_total = (A.n_sent + B.n_sent).astype(np.float64)
    # df of each entry's term in the other text of its pair, hence the tf-idf weights of every entry.
    a_key = A.pair * width + A.term
    b_key = B.pair * width + B.term
    b_df_at_a = _lookup(B.uterm_pair * width + B.uterm, B.uterm_df, a_key)
    a_df_at_b = _lookup(A.uterm_pair * width + A.uterm, A.uterm_df, b_key)
    with np.errstate(divide="ignore"):
        a_w = A.tf * np.log(n_total[A.pair] / (A.df + b_df_at_a))
        b_w = B.tf * np.log(n_total[B.pair] / (B.df + a_df_at_b))
    a_norm = np.sqrt(np.bincount(A.row_base[A.pair] + A.sent, a_w * a_w, minlength=int(A.n_sent.sum())))
    b_norm = np.sqrt(np.bincount(B.row_base[B.pair] + B.sent, b_w * b_w, minlength=int(B.n_sent.sum())))
    # Only A entries whose term occurs in B take part in the join; a pair without any is done (no seed).
    shared = b_df_at_a > 0
    products = np.bincount(A.pair[shared], b_df_at_a[shared], minlength=len(pairs))
    b_order = np.argsort(b_key, kind="stable")
    b_key_sorted = b_key[b_order]
    ctx = (A, B, a_key, a_w, b_w, b_order, b_key_sorted, a_norm, b_norm, th1, th2)
    chunk_lo, budget = None, 0.0
    for p in range(len(pairs) + 1):
        cost = products[p] if p < len(pairs) else 0.0
        big = cost > MAX_PRODUCTS
        if chunk_lo is not None and (p == len(pairs) or big or budget + cost > MAX_PRODUCTS):
            _join(ctx, _entry_range(A, shared, chunk_lo, p), out)
            chunk_lo, budget = None, 0.0
        if p == len(pairs) or cost == 0:
            continue
        if big:  # one huge pair: join it by ranges of A sentences
            for idx in _split_rows(A, shared, b_df_at_a, p):
                _join(ctx, idx, out)
            continue
        if chunk_lo is None:
            chunk_lo = p
        budget += cost
    return out


def _entry_range(A: _Side, shared: np.ndarray, p_lo: int, p_hi: int) -> np.ndarray:
    """Indices of the shared-term A entries of pairs p_lo..p_hi-1."""
    lo, hi = A.ent_base[p_lo], A.ent_base[p_hi]
    return lo + np.flatnonzero(shared[lo:hi])


def _split_rows(A: _Side, shared, b_df_at_a, p: int) -> list[np.ndarray]:
    idx = _entry_range(A, shared, p, p + 1)
    sent = A.sent[idx]
    per_row = np.bincount(sent, b_df_at_a[idx])
    parts, start, acc = [], 0, 0.0
    for row, cost in enumerate(per_row):
        if acc and acc + cost > MAX_PRODUCTS:
            parts.append(idx[(sent >= start) & (sent < row)])
            start, acc = row, 0.0
        acc += cost
    parts.append(idx[sent >= start])
    return parts


def _join(ctx, a_idx: np.ndarray, out: list[Seeds]) -> None:
    """Sum the weight products per sentence pair for the A entries a_idx and record the seeds."""
    A, B, a_key, a_w, b_w, b_order, b_key_sorted, a_norm, b_norm, th1, th2 = ctx
    if len(a_idx) == 0:
        return
    keys = a_key[a_idx]
    lo = np.searchsorted(b_key_sorted, keys, side="left")
    count = np.searchsorted(b_key_sorted, keys, side="right") - lo
    total = int(count.sum())
    if total == 0:
        return
    a_rep = np.repeat(a_idx, count)
    within = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
    b_idx = b_order[np.repeat(lo, count) + within]
    # One id per (A row, B row) cell: global row numbers are unique across pairs.
    a_row = A.row_base[A.pair[a_rep]] + A.sent[a_rep]
    b_row = B.row_base[B.pair[b_idx]] + B.sent[b_idx]
    cell = a_row * (int(b_row.max()) + 1) + b_row
    cells, first, inverse = np.unique(cell, return_index=True, return_inverse=True)
    dot = np.bincount(inverse, a_w[a_rep] * b_w[b_idx], minlength=len(cells))
    n_shared = np.bincount(inverse, minlength=len(cells))
    ra, rb = a_row[first], b_row[first]
    den = a_norm[ra] * b_norm[rb]
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = np.where(den > 0, dot / den, 0.0)
    dice = 2.0 * n_shared / (A.nterms[ra] + B.nterms[rb])
    seed = (cos > th1) & (dice > th2)
    if not seed.any():
        return
    pair = A.pair[a_rep[first[seed]]]
    src = A.sent[a_rep[first[seed]]]
    susp = B.sent[b_idx[first[seed]]]
    cos, dice = cos[seed], dice[seed]
    for p in np.unique(pair):
        m = pair == p
        new = Seeds(src[m], susp[m], cos[m], dice[m])
        old = out[p]
        if len(old):
            new = Seeds(*(np.concatenate([getattr(old, f), getattr(new, f)]) for f in ("src", "susp", "cosine", "dice")))
        out[p] = new
