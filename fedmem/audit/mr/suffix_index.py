"""BM25 index over one client's suffixes: build once per run, search many generations per round (SPEC §4).

Two backends behind one interface, both ranking as Elasticsearch does (``standard`` analyzer, BM25 with
k1 = 1.2 and b = 0.75, a ``match`` query, ties by document order):
- ``embedded`` (default): Lucene's analysis, length norm and float32 BM25 reproduced in ``fedmem.audit.mr.lucene``,
  every (term, suffix) contribution precomputed once, each batch of queries scored by one sparse product.
- ``elasticsearch``: the official client against a real server; one index per run and client, bulk-loaded,
  refreshed, ``match`` query on the ``suffix`` field, ``size`` k; it deletes only the indices it created.
  Elasticsearch 8 scores with Lucene's legacy BM25, which multiplies every score by (1 + k1); rankings are the
  same as the embedded backend's, and its scores are divided by (1 + k1) so both report the same figure.

The query is what the reference pipeline sends: the generation's tokens with English stopwords removed.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from fedmem.audit.mr.lucene import Bm25Matrix, standard_tokens
from fedmem.common.fields import check_fields, option

# Lucene's English stopword set (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET), the list Elasticsearch's `_english_` uses.
ENGLISH_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split()
)
def public_url(url: str) -> str:
    """``url`` without its user information, for messages and reports."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")))


def analyze(text: str) -> list[str]:
    """Elasticsearch's ``standard`` analyzer: UAX #29 word tokens, lowercased, no stopwords."""
    return standard_tokens(text)


def query_terms(text: str) -> list[str]:
    """The query the reference pipeline sends for a generation: its tokens without English stopwords."""
    return [t for t in analyze(text) if t not in ENGLISH_STOPWORDS]


@dataclass
class IndexConfig:
    backend: Literal["embedded", "elasticsearch"] = option(
        "embedded", "embedded (Lucene's BM25, reproduced) | elasticsearch")
    k1: float = option(1.2, "BM25 k1 (Elasticsearch default)")
    b: float = option(0.75, "BM25 b (Elasticsearch default)")
    es_url: str | None = option(
        None, "Elasticsearch URL without credentials; None = $FEDMEM_ES_URL (the place for a user and password)")
    es_prefix: str = option("fedmem", "prefix of the index names this run creates")

    def __post_init__(self):
        check_fields(self, "audit.mr.index")
        if self.k1 < 0 or not 0 <= self.b <= 1:
            raise ValueError("audit.mr.index needs k1 >= 0 and 0 <= b <= 1")
        if self.es_url and urlsplit(self.es_url).password is not None:
            raise ValueError(f"audit.mr.index.es_url={public_url(self.es_url)} carries a password, which would be "
                             "written into the run's config: give the URL with credentials in $FEDMEM_ES_URL instead")
        if self.backend == "elasticsearch" and not (self.es_url or os.environ.get("FEDMEM_ES_URL")):
            raise ValueError("audit.mr.index.backend=elasticsearch needs audit.mr.index.es_url or $FEDMEM_ES_URL")


class EmbeddedIndex:
    def __init__(self, texts: list[str], cfg: IndexConfig):
        self.matrix = Bm25Matrix([analyze(t) for t in texts], k1=cfg.k1, b=cfg.b)

    def search(self, queries: list[str], k: int = 10) -> list[list[tuple[int, float]]]:
        return self.search_terms([query_terms(q) for q in queries], k)

    def search_terms(self, terms: list[list[str]], k: int = 10) -> list[list[tuple[int, float]]]:
        """``search`` for queries already analysed with ``query_terms`` (one analysis serves every index)."""
        return self.matrix.search(terms, k)

    def close(self) -> None:
        pass


def elasticsearch_client(cfg: IndexConfig, timeout: float = 30):
    """A client of the configured server, checked with one request; an unreachable or refusing server is a
    ValueError naming the URL without its credentials (those from $FEDMEM_ES_URL are never echoed)."""
    from elasticsearch import Elasticsearch

    url = cfg.es_url or os.environ.get("FEDMEM_ES_URL")
    es = Elasticsearch(url, request_timeout=timeout)
    try:
        es.info()
    except Exception as e:
        reason = str(e).replace(url, public_url(url)).splitlines()[0] if str(e) else type(e).__name__
        if urlsplit(url).password:
            reason = reason.replace(urlsplit(url).password, "***")
        raise ValueError(f"audit.mr.index: Elasticsearch at {public_url(url)} is unreachable or refused the "
                         f"connection: {reason}") from None
    return es


class ElasticsearchIndex:
    def __init__(self, texts: list[str], cfg: IndexConfig, name: str):
        from elasticsearch import helpers

        self.es = elasticsearch_client(cfg)
        self.legacy_factor = 1 + cfg.k1  # Elasticsearch 8's LegacyBM25Similarity: Lucene's BM25 x (1 + k1)
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
        return self.search_terms([query_terms(q) for q in queries], k)

    def search_terms(self, term_lists: list[list[str]], k: int = 10) -> list[list[tuple[int, float]]]:
        out = []
        for q in term_lists:
            terms = " ".join(q)
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
            out.append([(int(h["_id"]), float(h["_score"]) / self.legacy_factor) for h in res["hits"]["hits"]])
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
