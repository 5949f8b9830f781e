"""Top-10 BM25 retrieval: the embedded suffix index vs rank_bm25, same run (target >= 10x, >= 99% same top-10).

    python bench/retrieval.py [--queries 12000] [--docs 4000] [--clients 3] [--ref-queries 300]

Corpus: seeded English-like texts from a Zipfian vocabulary (suffixes 30-60 words, queries 20-60 words).
The reference is rank_bm25 configured to the same variant as Lucene/Elasticsearch (idf = ln(1 + (N - df + 0.5) /
(df + 0.5)), k1 = 1.2, b = 0.75, no (k1 + 1) factor), so both should rank identically; it is slow, so it is
timed on --ref-queries queries and its per-query time extrapolated to all queries (said in the output).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rank_bm25 import BM25  # noqa: E402

from fedmem.audit.suffix_index import analyze, query_terms, suffix_index  # noqa: E402


class LuceneBM25(BM25):
    """rank_bm25 with Lucene's BM25 (the variant Elasticsearch and the embedded index use)."""

    def __init__(self, corpus, k1=1.2, b=0.75):
        self.k1, self.b = k1, b
        super().__init__(corpus)

    def _calc_idf(self, nd):
        for word, freq in nd.items():
            self.idf[word] = math.log(1 + (self.corpus_size - freq + 0.5) / (freq + 0.5))

    def get_scores(self, query):
        score = np.zeros(self.corpus_size)
        dl = np.array(self.doc_len)
        for q in query:
            tf = np.array([(doc.get(q) or 0) for doc in self.doc_freqs])
            score += (self.idf.get(q) or 0) * tf / (tf + self.k1 * (1 - self.b + self.b * dl / self.avgdl))
        return score


def texts(rng, n, lo, hi, vocab):
    p = 1 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    return [" ".join(rng.choice(vocab, size=rng.integers(lo, hi + 1), p=p)) for _ in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=12000)
    ap.add_argument("--docs", type=int, default=4000)
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--ref-queries", type=int, default=300)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    vocab = np.array([f"w{i}" for i in range(5000)] + ["the", "of", "and", "a", "to", "in", "is"])
    corpora = [texts(rng, args.docs, 30, 60, vocab) for _ in range(args.clients)]
    queries = texts(rng, args.queries, 20, 60, vocab)

    t = time.perf_counter()
    indexes = [suffix_index(c) for c in corpora]
    build = time.perf_counter() - t
    t = time.perf_counter()
    ours = [ix.search(queries, 10) for ix in indexes]
    ours_s = time.perf_counter() - t

    refs = [LuceneBM25([analyze(d) for d in c]) for c in corpora]
    sub = queries[: args.ref_queries]
    t = time.perf_counter()
    same = total = 0
    for ci, ref in enumerate(refs):
        for qi, q in enumerate(sub):
            scores = ref.get_scores(query_terms(q))
            top = [int(i) for i in np.lexsort((np.arange(len(scores)), -scores))[:10] if scores[i] > 0]
            same += set(top) == {d for d, _ in ours[ci][qi]}
            total += 1
    ref_s = (time.perf_counter() - t) / len(sub) * len(queries)
    print(f"{args.queries} queries x {args.clients} indexes of {args.docs} suffixes, top-10")
    print(f"embedded: index build {build:.2f} s, search {ours_s:.2f} s ({args.queries * args.clients / ours_s:.0f} q/s)")
    print(f"rank_bm25 (Lucene variant): {ref_s:.1f} s extrapolated from {len(sub)} queries per index")
    print(f"speed ratio embedded / rank_bm25: {ref_s / ours_s:.1f}x (target >= 10x)")
    print(f"identical top-10 sets: {100 * same / total:.2f}% of {total} (target >= 99%)")


if __name__ == "__main__":
    main()
