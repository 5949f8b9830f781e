"""Top-10 BM25 retrieval: the embedded suffix index vs references that score as Lucene does, same run
(target >= 10x faster than the rank_bm25 reference, 100% identical top-10).

    python bench/retrieval.py [--queries 12000] [--docs 4000] [--clients 3] [--ref-queries 300] [--lucene-queries 3000]

Corpus: seeded texts from a Zipfian vocabulary (suffixes 30-60 words, queries 20-60 words). References:
- rank_bm25 configured as Lucene 9's BM25 (idf = ln(1 + (N - df + 0.5) / (df + 0.5)), k1 = 1.2, b = 0.75, no
  (k1 + 1) factor) with Lucene's one-byte length norm, written here from its definition (a length keeps its four
  leading bits beyond 24). It is slow, so it is timed on --ref-queries queries and extrapolated (said so).
- real Lucene (Anserini's jar inside pyserini, when installed with a JDK) on --lucene-queries queries of the
  first index: agreement only, since a JVM round trip is not a comparable timing.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time

import numpy as np
from rank_bm25 import BM25
from references import lucene_top_k, stored_length, zipf_texts

from fedmem.audit.mr.suffix_index import analyze, query_terms, suffix_index


class LuceneBM25(BM25):
    """rank_bm25 with Lucene's BM25 (the variant Elasticsearch and the embedded index use) and its length norm."""

    def __init__(self, corpus, k1=1.2, b=0.75):
        self.k1, self.b = k1, b
        super().__init__(corpus)
        self.stored_len = np.array([stored_length(n) for n in self.doc_len], dtype=float)

    def _calc_idf(self, nd):
        for word, freq in nd.items():
            self.idf[word] = math.log(1 + (self.corpus_size - freq + 0.5) / (freq + 0.5))

    def get_scores(self, query):
        score = np.zeros(self.corpus_size)
        dl = self.stored_len
        for q in query:
            tf = np.array([(doc.get(q) or 0) for doc in self.doc_freqs])
            score += (self.idf.get(q) or 0) * tf / (tf + self.k1 * (1 - self.b + self.b * dl / self.avgdl))
        return score


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=12000)
    ap.add_argument("--docs", type=int, default=4000)
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--ref-queries", type=int, default=300)
    ap.add_argument("--lucene-queries", type=int, default=3000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    vocab = np.array([f"w{i}" for i in range(5000)] + ["the", "of", "and", "a", "to", "in", "is"])
    corpora = [zipf_texts(rng, args.docs, 30, 60, vocab) for _ in range(args.clients)]
    queries = zipf_texts(rng, args.queries, 20, 60, vocab)

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
            same += top == [d for d, _ in ours[ci][qi]]
            total += 1
    ref_s = (time.perf_counter() - t) / len(sub) * len(queries)
    print(f"{args.queries} queries x {args.clients} indexes of {args.docs} suffixes, top-10")
    print(f"embedded: index build {build:.2f} s, search {ours_s:.2f} s ({args.queries * args.clients / ours_s:.0f} q/s)")
    print(f"rank_bm25 (Lucene variant): {ref_s:.1f} s extrapolated from {len(sub)} queries per index")
    print(f"speed ratio embedded / rank_bm25: {ref_s / ours_s:.1f}x (target >= 10x)")
    print(f"identical top-10 (set and order) vs rank_bm25: {100 * same / total:.2f}% of {total} (target 100%)")
    with tempfile.TemporaryDirectory() as work:
        sub = queries[: args.lucene_queries]
        ref = lucene_top_k(corpora[0], [" ".join(query_terms(q)) for q in sub], 10, work)
    if ref is None:
        print("real Lucene: not available (needs a JDK and pyserini==0.25.0 installed with --no-deps)")
    else:
        sets = np.mean([{d for d, _ in a} == {d for d, _ in b} for a, b in zip(ours[0], ref)])
        order = np.mean([[d for d, _ in a] == [d for d, _ in b] for a, b in zip(ours[0], ref)])
        print(f"vs real Lucene ({len(sub)} queries, index 0): identical top-10 sets {100 * sets:.2f}%, "
              f"order {100 * order:.2f}% (targets >= 99.5%, >= 99%)")


if __name__ == "__main__":
    main()
