"""The suffix index: Lucene BM25 scores computed by hand, the analyzer, ranking rules, and (with a server at
$FEDMEM_ES_URL) the same top-10 from Elasticsearch as from the embedded backend."""

import math
import os
import random

import pytest

from fedmem.audit.mr.suffix_index import (
    ENGLISH_STOPWORDS,
    IndexConfig,
    analyze,
    query_terms,
    suffix_index,
)

DOCS = [
    "The patient reports chest pain after climbing stairs.",
    "Chest pain and chest tightness, worse at night; no fever.",
    "A rash on both arms, itching for two weeks.",
    "Fever and cough for three days, with chest pain.",
    "Stairs, stairs and more stairs: knee pain when climbing.",
]


def lucene_bm25(query: str, docs: list[str], k1=1.2, b=0.75) -> list[float]:
    """Elasticsearch's BM25 (Lucene >= 8: no (k1 + 1) factor) of an OR query, term by term, by hand."""
    toks = [analyze(d) for d in docs]
    n, avgdl = len(docs), sum(map(len, toks)) / len(docs)
    scores = []
    for d in toks:
        s = 0.0
        for t in query_terms(query):  # a repeated query term is a repeated SHOULD clause: it counts again
            df = sum(t in x for x in toks)
            tf = d.count(t)
            if tf:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                s += idf * tf / (tf + k1 * (1 - b + b * len(d) / avgdl))
        scores.append(s)
    return scores


def test_analyzer_lowercases_splits_on_punctuation_and_queries_drop_stopwords():
    assert analyze("Chest-pain, WORSE at night!") == ["chest", "pain", "worse", "at", "night"]
    assert query_terms("The pain is in the chest") == ["pain", "chest"]
    assert {"the", "and", "of", "is"} <= ENGLISH_STOPWORDS
    assert "pain" not in ENGLISH_STOPWORDS


@pytest.mark.parametrize("query", ["chest pain", "stairs climbing knee", "fever cough chest", "pain pain rash"])
def test_embedded_scores_equal_hand_computed_lucene_bm25(query):
    idx = suffix_index(DOCS)
    expected = lucene_bm25(query, DOCS)
    hits = idx.search([query], k=10)[0]
    assert [i for i, _ in hits] == sorted((i for i, s in enumerate(expected) if s > 0), key=lambda i: (-expected[i], i))
    for i, s in hits:
        assert s == pytest.approx(expected[i], rel=1e-5)


def test_k1_and_b_are_used():
    flat = suffix_index(DOCS, IndexConfig(k1=2.0, b=0.0)).search(["chest pain"])[0]
    expected = lucene_bm25("chest pain", DOCS, k1=2.0, b=0.0)
    assert [s for _, s in flat] == pytest.approx(sorted((s for s in expected if s > 0), reverse=True), rel=1e-5)


def test_ties_break_by_document_order_and_k_caps_results():
    docs = ["alpha beta", "gamma delta", "alpha beta", "alpha beta", "epsilon"]
    hits = suffix_index(docs).search(["alpha"], k=2)[0]
    assert [i for i, _ in hits] == [0, 2]
    assert len(suffix_index(docs).search(["alpha"], k=100)[0]) == 3  # only documents that match at all


def test_queries_without_known_terms_return_nothing():
    idx = suffix_index(DOCS)
    assert idx.search(["", "the and of", "zebra xylophone", "   "]) == [[], [], [], []]


def test_many_queries_in_one_call_match_single_calls():
    rng = random.Random(0)
    words = sorted({w for d in DOCS for w in analyze(d)})
    queries = [" ".join(rng.choices(words, k=rng.randint(1, 8))) for _ in range(50)]
    idx = suffix_index(DOCS)
    assert idx.search(queries) == [idx.search([q])[0] for q in queries]


def test_bad_index_configs_are_rejected_with_the_key_named(monkeypatch):
    with pytest.raises(ValueError, match="backend"):
        IndexConfig(backend="faiss")
    with pytest.raises(ValueError, match="k1"):
        IndexConfig(b=1.5)
    monkeypatch.delenv("FEDMEM_ES_URL", raising=False)
    with pytest.raises(ValueError, match="FEDMEM_ES_URL"):
        IndexConfig(backend="elasticsearch")


def test_credentials_stay_in_the_environment_and_out_of_messages(monkeypatch):
    from fedmem.audit.mr.suffix_index import public_url

    assert public_url("https://elastic:s3cret@es.example:9200/x") == "https://es.example:9200/x"
    with pytest.raises(ValueError, match="FEDMEM_ES_URL") as info:
        IndexConfig(backend="elasticsearch", es_url="http://elastic:s3cret@127.0.0.1:9")
    assert "s3cret" not in str(info.value)
    monkeypatch.setenv("FEDMEM_ES_URL", "http://elastic:s3cret@127.0.0.1:9")
    with pytest.raises(ValueError, match="unreachable") as info:
        suffix_index(DOCS, IndexConfig(backend="elasticsearch"))
    assert "s3cret" not in str(info.value) and "127.0.0.1:9" in str(info.value)


def test_unreachable_elasticsearch_is_one_clear_error():
    cfg = IndexConfig(backend="elasticsearch", es_url="http://127.0.0.1:9")  # discard port: nothing listens
    with pytest.raises(ValueError, match="unreachable"):
        suffix_index(DOCS, cfg)


def _fixture(n_docs=300, n_queries=60, seed=0):
    """Suffix-like documents and generation-like queries over a shared Zipf-ish vocabulary."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(400)] + sorted(ENGLISH_STOPWORDS)
    weights = [1 / (r + 1) for r in range(len(vocab))]
    docs = [" ".join(rng.choices(vocab, weights, k=rng.randint(20, 60))) for _ in range(n_docs)]
    queries = [" ".join(rng.choices(vocab, weights, k=rng.randint(10, 40))) for _ in range(n_queries)]
    return docs, queries


@pytest.mark.skipif(not os.environ.get("FEDMEM_ES_URL"), reason="needs an Elasticsearch server at $FEDMEM_ES_URL")
def test_elasticsearch_ranks_like_the_embedded_index():
    from elasticsearch import Elasticsearch

    docs, queries = _fixture()
    es_cfg = IndexConfig(backend="elasticsearch", es_prefix="fedmem-test")
    es_idx = suffix_index(docs, es_cfg, name="fixture")
    name = es_idx.name
    try:
        got = es_idx.search(queries, k=10)
    finally:
        es_idx.close()
    want = suffix_index(docs).search(queries, k=10)
    same_set = sum({i for i, _ in g} == {i for i, _ in w} for g, w in zip(got, want))
    same_order = sum([i for i, _ in g] == [i for i, _ in w] for g, w in zip(got, want))
    assert same_set / len(queries) >= 0.995, f"top-10 sets agree on {same_set}/{len(queries)} queries"
    assert same_order / len(queries) >= 0.99, f"top-10 order agrees on {same_order}/{len(queries)} queries"
    for g, w in zip(got, want):  # the backend divides Elasticsearch's legacy (1 + k1) factor out
        assert [s for _, s in g] == pytest.approx([s for _, s in w], rel=1e-5)
    assert not Elasticsearch(os.environ["FEDMEM_ES_URL"]).indices.exists(index=name)  # it cleaned up after itself
