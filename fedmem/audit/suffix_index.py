"""BM25 index over one client's suffixes: build once per run, search many generations per round (SPEC §4).

Two backends behind one interface:
- ``embedded`` (default): bm25s with the Lucene BM25 variant (idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
  k1 = 1.2, b = 0.75: Elasticsearch's defaults). Documents are analysed like Elasticsearch's ``standard``
  analyzer (Unicode word segmentation approximated by ``\\w+``, lowercased, no stemming, no stopwords);
  queries are the generation word-tokenized with English stopwords removed (the reference pipeline's query),
  OR-matched. Ties are broken by document index so results are deterministic.
- ``elasticsearch``: the official client against a real server; one index per run and client, bulk-loaded,
  refreshed, ``match`` query on the ``suffix`` field, ``size`` k; it deletes only the indices it created.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fedmem.config import check_fields, option

# Lucene's English stopword set (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET), the list Elasticsearch's `_english_` uses.
ENGLISH_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split()
)
_WORD = re.compile(r"\w+", re.UNICODE)


def analyze(text: str) -> list[str]:
    """The standard analyzer, approximately: word tokens, lowercased."""
    return [t.lower() for t in _WORD.findall(text)]


def query_terms(text: str) -> list[str]:
    return [t for t in analyze(text) if t not in ENGLISH_STOPWORDS]


@dataclass
class IndexConfig:
    backend: Literal["embedded", "elasticsearch"] = option("embedded", "embedded (bm25s, Lucene BM25) | elasticsearch")
    k1: float = option(1.2, "BM25 k1 (Elasticsearch default)")
    b: float = option(0.75, "BM25 b (Elasticsearch default)")
    es_url: str | None = option(None, "Elasticsearch URL; None = $FEDMEM_ES_URL")
    es_prefix: str = option("fedmem", "prefix of the index names this run creates")

    def __post_init__(self):
        check_fields(self, "audit.mr.index")
        if self.k1 < 0 or not 0 <= self.b <= 1:
            raise ValueError("audit.mr.index needs k1 >= 0 and 0 <= b <= 1")
        if self.backend == "elasticsearch" and not (self.es_url or os.environ.get("FEDMEM_ES_URL")):
            raise ValueError("audit.mr.index.backend=elasticsearch needs audit.mr.index.es_url or $FEDMEM_ES_URL")


class EmbeddedIndex:
    def __init__(self, texts: list[str], cfg: IndexConfig):
        import bm25s

        self.n = len(texts)
        docs = [analyze(t) for t in texts]
        self.vocab: dict[str, int] = {}
        ids = [[self.vocab.setdefault(w, len(self.vocab)) for w in d] for d in docs]
        self.bm25 = bm25s.BM25(k1=cfg.k1, b=cfg.b, method="lucene")
        self.bm25.index(bm25s.tokenization.Tokenized(ids=ids, vocab=self.vocab), show_progress=False)

    def search(self, queries: list[str], k: int = 10) -> list[list[tuple[int, float]]]:
        out = []
        k = min(k, self.n)
        for q in queries:
            terms = [self.vocab[t] for t in query_terms(q) if t in self.vocab]
            if not terms or k == 0:
                out.append([])
                continue
            scores = self.bm25.get_scores(terms)  # OR query: the sum over the query's terms
            top = np.lexsort((np.arange(self.n), -scores))[:k]  # by score, ties by doc index
            out.append([(int(i), float(scores[i])) for i in top if scores[i] > 0])
        return out

    def close(self) -> None:
        pass


class ElasticsearchIndex:
    def __init__(self, texts: list[str], cfg: IndexConfig, name: str):
        from elasticsearch import Elasticsearch, helpers

        url = cfg.es_url or os.environ.get("FEDMEM_ES_URL")
        self.es = Elasticsearch(url, request_timeout=30)
        try:
            self.es.info()
        except Exception as e:
            raise RuntimeError(f"Elasticsearch at {url} is unreachable or refused the connection: {e}") from None
        self.name = f"{cfg.es_prefix}-{name}-{uuid.uuid4().hex[:8]}".lower()
        settings = {
            "index": {"number_of_shards": 1, "similarity": {"default": {"type": "BM25", "k1": cfg.k1, "b": cfg.b}}}
        }
        try:
            self.es.indices.create(
                index=self.name, settings=settings, mappings={"properties": {"suffix": {"type": "text"}}}
            )
            helpers.bulk(self.es, ({"_index": self.name, "_id": i, "suffix": t} for i, t in enumerate(texts)))
            self.es.indices.refresh(index=self.name)
        except Exception as e:
            self.close()
            raise RuntimeError(f"Elasticsearch refused to build index {self.name}: {e}") from None

    def search(self, queries: list[str], k: int = 10) -> list[list[tuple[int, float]]]:
        out = []
        for q in queries:
            terms = " ".join(query_terms(q))
            if not terms:
                out.append([])
                continue
            res = self.es.search(
                index=self.name,
                query={"match": {"suffix": terms}},
                size=k,
                sort=[{"_score": "desc"}, {"_doc": "asc"}],
                track_scores=True,
            )
            out.append([(int(h["_id"]), float(h["_score"])) for h in res["hits"]["hits"]])
        return out

    def close(self) -> None:
        if getattr(self, "name", None):
            self.es.options(ignore_status=404).indices.delete(index=self.name)
            self.name = None


def suffix_index(texts: list[str], cfg: IndexConfig | None = None, name: str = "run"):
    """Build the configured backend over ``texts`` (one client's sampled suffixes)."""
    cfg = cfg or IndexConfig()
    if cfg.backend == "elasticsearch":
        return ElasticsearchIndex(texts, cfg, name)
    return EmbeddedIndex(texts, cfg)
