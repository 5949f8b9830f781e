"""The embedded index against real Lucene 9 (Anserini's jar, from `pyserini` installed without its dependencies,
and a JDK): the same top-10 sets and order on the retrieval bench's corpus and on real English prose. Skipped
where Java or the jar is missing."""

import numpy as np
import pytest

from bench.references import english_passages, lucene_top_k, zipf_texts
from fedmem.audit.mr.suffix_index import query_terms, suffix_index


def agreement(docs: list[str], queries: list[str], workdir) -> dict[str, float]:
    ours = suffix_index(docs).search(queries, 10)
    ref = lucene_top_k(docs, [" ".join(query_terms(q)) for q in queries], 10, workdir)
    if ref is None:
        pytest.skip("needs Java and Anserini's Lucene jar (pip install --no-deps pyserini==0.25.0)")
    ranked = [([d for d, _ in a], [d for d, _ in b]) for a, b in zip(ours, ref)]
    scores = [(np.float32(x), np.float32(y)) for a, b in zip(ours, ref) for (_, x), (_, y) in zip(a, b)]
    return {"sets": float(np.mean([set(a) == set(b) for a, b in ranked])),
            "order": float(np.mean([a == b for a, b in ranked])),
            "max_rel_score_diff": max(abs(float(x - y)) / float(y) for x, y in scores)}


def test_bench_corpus_ranks_like_lucene(tmp_path):
    rng = np.random.default_rng(0)
    vocab = np.array([f"w{i}" for i in range(5000)] + ["the", "of", "and", "a", "to", "in", "is"])
    got = agreement(zipf_texts(rng, 4000, 30, 60, vocab), zipf_texts(rng, 3000, 20, 60, vocab), tmp_path)
    print("bench corpus vs Lucene:", got)
    assert got["sets"] >= 0.995 and got["order"] >= 0.99 and got["max_rel_score_diff"] < 1e-6


def test_english_prose_ranks_like_lucene(tmp_path):
    docs, queries = english_passages(50, 50), english_passages(40, 17)
    if len(docs) < 100:
        pytest.skip("no licence texts installed with the dependencies (bench/references.py)")
    got = agreement(docs, queries, tmp_path)
    print("English prose vs Lucene:", got)
    assert got["sets"] >= 0.995 and got["order"] >= 0.99 and got["max_rel_score_diff"] < 1e-6
