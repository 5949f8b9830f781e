"""MR's matching step as a reusable part: texts against every client's training-suffix index, then the detector.

MR's protocol (SPEC §3, steps 3-5) takes a text (a generation), retrieves each client's top-n' suffixes by BM25 and
types every (text, suffix) pair with the PAN2014 detector. :class:`SuffixMatcher` holds the indexes and the detector
and runs that step for any list of texts, so the same step serves the paper's MR (generations from training
prefixes), MR's control (generations from held-out prefixes, and the training prefixes' own record left out, SPEC
§3b) and the data's **floor**, which needs no model: the held-out texts' own true continuations matched as if they
were generations, the MR any writer of this data scores without having memorized a record.

Hits on shared text: each indexed suffix's shared passages (``fedmem.audit.mr.shared_text``, found by exact search over
every client's training split and the public share) are marked once per run; a hit whose matched suffix text lies
mostly in them is labelled shared, the rest distinctive.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from fedmem.audit.mr.detector import CATEGORIES, Detection, PlagiarismDetector
from fedmem.audit.mr.shared_text import Passage, shared_passages
from fedmem.audit.mr.stats import mr_figures
from fedmem.audit.mr.suffix_index import IndexConfig, query_terms, suffix_index

# A hit is shared when more than this share of the suffix characters it matched lie in shared passages.
SHARED_COVER = 0.5


def merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching ``[start, end)`` spans merged, in order."""
    out: list[list[int]] = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def covered(spans: list[tuple[int, int]], within: list[tuple[int, int]]) -> int:
    """Characters of the (merged) ``spans`` that lie inside the (merged) ``within``."""
    return sum(max(0, min(b, d) - max(a, c)) for a, b in spans for c, d in within)


def matched_shared(det: Detection, passages: list[Passage]) -> bool:
    """Whether a detection matched shared text: more than half of the suffix characters its cases cover lie in the
    suffix's shared ``passages``."""
    spans = merge_spans([(c.susp_start, c.susp_end) for c in det.cases])
    total = sum(b - a for a, b in spans)
    return total > 0 and covered(spans, [(p.start, p.end) for p in passages]) > SHARED_COVER * total


def top_ranked(owners: list[tuple[int, int, int]], k: int, leave_out: dict[int, tuple[int, int]] | None = None
               ) -> list[tuple[int, int, int]]:
    """The first ``k`` retrieved suffixes of each (text, client) in :meth:`SuffixMatcher.retrieve`'s rank order,
    text i's ``leave_out[i]`` (client, suffix) passed over, so that the next one takes its place."""
    taken: Counter = Counter()
    out = []
    for i, c, doc in owners:
        if (leave_out and leave_out.get(i) == (c, doc)) or taken[i, c] >= k:
            continue
        taken[i, c] += 1
        out.append((i, c, doc))
    return out


@dataclass
class Matches:
    """What a list of texts matched: per category (and ``any``), for each text the set of clients hit; per text its
    detections ``(client, suffix index, Detection)``; and the same hits counting distinctive text only."""

    hits: dict[str, list[set[int]]]
    matched: list[list[tuple[int, int, Detection]]]
    distinctive: dict[str, list[set[int]]]
    pairs: int = 0


def empty_hits(n: int) -> dict[str, list[set[int]]]:
    """Per category (and ``any``), an empty set of clients for each of ``n`` texts."""
    return {cat: [set() for _ in range(n)] for cat in (*CATEGORIES, "any")}


@dataclass
class SuffixMatcher:
    """Every client's training suffixes (``suffixes[k]``: client k's suffix texts), indexed once; ``match`` runs MR's
    retrieval and detector on any texts against all of them."""

    suffixes: dict[int, list[str]]
    detector: PlagiarismDetector
    top_k: int = 10
    index_cfg: IndexConfig = field(default_factory=IndexConfig)
    shared: dict[tuple[int, int], list[Passage]] = field(default_factory=dict)  # (k, doc) -> its shared passages

    def __post_init__(self):
        self.indexes = {k: suffix_index(texts, self.index_cfg, name=f"c{k}") for k, texts in self.suffixes.items()}

    @property
    def clients(self) -> list[int]:
        return sorted(self.suffixes)

    def close(self) -> None:
        for ix in self.indexes.values():
            ix.close()

    def retrieve(self, texts: list[str], clients=None, k: int | None = None) -> list[tuple[int, int, int]]:
        """(text number, client, suffix index) of every retrieved suffix: each text's top ``k`` (default n') in each
        client's index, client by client, text by text, in rank order."""
        terms = [query_terms(t) for t in texts]  # each text analysed once, whatever the number of indexes
        out = []
        for c in clients if clients is not None else self.clients:
            for i, found in enumerate(self.indexes[c].search_terms(terms, k or self.top_k)):
                out += [(i, c, doc) for doc, _score in found]
        return out

    def detect(self, pairs: list[tuple[str, str]], bars=None, label: str = "detector") -> list[Detection]:
        """The detector over ``pairs``, with a progress bar from ``bars(total, label)`` (``AuditedModel.progress``)."""
        if not pairs:
            return []
        if bars is None:
            return self.detector.detect_batch(pairs)
        with bars(len(pairs), label) as bar:
            return self.detector.detect_batch(pairs, progress=bar.advance)

    def match(self, texts: list[str], bars=None, label: str = "mr detector") -> Matches:
        """Retrieval and detection for ``texts`` (progress shown through ``bars``, as in :meth:`detect`)."""
        owners = self.retrieve(texts)
        return self.collect(len(texts), owners, self.detect(self.pairs(texts, owners), bars, label))

    def pairs(self, texts: list[str], owners: list[tuple[int, int, int]]) -> list[tuple[str, str]]:
        """The detector's (text, retrieved suffix) pairs of :meth:`retrieve`'s result."""
        return [(texts[i], self.suffixes[k][doc]) for i, k, doc in owners]

    def collect(self, n_texts: int, owners: list[tuple[int, int, int]], detections: list[Detection]) -> Matches:
        """The hits per category of ``n_texts`` texts from their retrieved suffixes' detections."""
        hits, distinctive = empty_hits(n_texts), empty_hits(n_texts)
        matched: list[list] = [[] for _ in range(n_texts)]
        for (i, k, doc), det in zip(owners, detections):
            if det.category not in CATEGORIES:
                continue
            matched[i].append((k, doc, det))
            for cat in (det.category, "any"):
                hits[cat][i].add(k)
                if not self.is_shared(k, doc, det):
                    distinctive[cat][i].add(k)
        return Matches(hits, matched, distinctive, len(owners))

    def is_shared(self, k: int, doc: int, det: Detection) -> bool:
        """Whether a hit on suffix ``doc`` of client ``k`` matched shared text (:func:`matched_shared`)."""
        return matched_shared(det, self.shared.get((k, doc), []))

    def mark_shared(self, training: dict[int, tuple[str, ...]], public: tuple[str, ...] = (),
                    extra: list[tuple[int, str]] = ()) -> list[list[Passage]]:
        """Mark every indexed suffix's shared passages: runs of at least 50 characters that the training texts of
        another client (``training``: every client's, whole) or the public share also hold. Once per run. Returns
        the shared passages of the ``extra`` (owner client, text) pairs, found in the same search."""
        keys = [(k, doc) for k in self.clients for doc in range(len(self.suffixes[k]))]
        found = shared_passages([(k, self.suffixes[k][doc]) for k, doc in keys] + list(extra), training, public)
        self.shared = {key: passages for key, passages in zip(keys, found) if passages}
        return found[len(keys):]

    def shared_passages(self, limit: int = 20) -> list[dict]:
        """The shared passages, most frequent first: their text (whitespace normalised), how many indexed suffixes
        hold them, which clients' training texts hold them, and whether the public share holds them too."""
        held: Counter = Counter()
        clients: dict[str, set[int]] = {}
        public: set[str] = set()
        for (k, doc), passages in self.shared.items():
            for p in passages:
                text = " ".join(self.suffixes[k][doc][p.start:p.end].split())
                held[text] += 1
                clients.setdefault(text, set()).update(p.clients)
                if p.public:
                    public.add(text)
        return [{"text": t, "suffixes": n, "clients": sorted(clients[t]), "public": t in public}
                for t, n in held.most_common(limit)]

    def shared_suffixes(self) -> dict[int, int]:
        """Per client, how many of its indexed suffixes hold a shared passage."""
        out = {k: 0 for k in self.clients}
        for (k, _doc), passages in self.shared.items():
            out[k] += bool(passages)
        return out


def figure_summary(f: dict) -> dict:
    """MR_Intra, MR_Inter, MR_Total with their 95% intervals, and the matrix, of one category's ``mr_figures``."""
    unc = f["uncertainty"]
    # the size a plain proportion would need for the weighted mean's design (Kish's), and MR_Total's prefixes: what
    # the smallest detectable excess is computed at
    kish = 1 / sum(w * w / n for w, n in zip(f["weights"], f["n"]) if n) if any(f["n"]) else 0.0
    return {"intra": f["intra"], "intra_ci95": unc["intra"]["ci95"],
            "inter": f["inter"], "inter_ci95": (unc.get("inter") or {}).get("ci95"),
            "total": f["total"], "total_ci95": unc["total"]["ci95"], "matrix": f["matrix"], "n": f["n"],
            "n_eff": {"intra": kish, "inter": kish, "total": float(sum(f["n"]))}}


def mr_summary(prefix_clients: list[int], hits: dict[str, list[set[int]]], sizes) -> dict:
    """SPEC §3's aggregates per category (:func:`figure_summary`) of the hits of prefixes of ``prefix_clients``."""
    return {cat: figure_summary(mr_figures(prefix_clients, h, sizes)) for cat, h in hits.items()}


def data_floor(matcher: SuffixMatcher, clients: list[int], continuations: list[str], sizes, bars=None) -> dict:
    """The data's own floor (SPEC §3b): ``continuations[i]`` (the true rest of a held-out text of ``clients[i]``)
    matched as if it were a generation; MR's figures over them, on all text and on distinctive text."""
    m = matcher.match(continuations, bars, "data floor")
    return {"all": mr_summary(clients, m.hits, sizes), "distinctive": mr_summary(clients, m.distinctive, sizes),
            "texts": len(continuations)}
