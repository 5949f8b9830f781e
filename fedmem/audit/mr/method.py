"""Cross-client memorization ratio MR(j→k) as a per-round audit method (SPEC §3), with its control (SPEC §3b).

Per round: one generation pass over every client's sampled ordinary training prefixes, its planted canaries and,
for the control, as many held-out prefixes (shared through ``AuditedModel``), the incoherence filter, BM25 over every
client's training-suffix index and one batched detector call over every (generation, suffix) pair
(``fedmem.audit.mr.suffix_match``). From them:

- the paper's MR, from the ordinary training prefixes, as the paper's code computes it (the index holds each
  prefix's own continuation);
- the control on exchangeable arms: each training and held-out prefix's hits on its **own record** (its generation
  typed against its own true continuation) and on **other records** (each index's top n' with the prefix's own
  suffix left out), their union, each arm's MR and the excess, on all text and on distinctive text;
- the canaries in a table of their own against their ground truth (they have no held-out counterpart, and a planted,
  repeated secret is what a model memorizes first: no ordinary rate counts them).

Built once per run: the indexes (the samples are fixed), the shared passages and the data's floor, which need no
model.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

from fedmem.audit.base import AuditedModel, AuditMethod, AuditPool, Figure, register
from fedmem.audit.intervals import detectable_excess, newcombe
from fedmem.audit.mr.detector import (
    CATEGORIES,
    Detection,
    DetectorConfig,
    PlagiarismDetector,
    is_incoherent,
)
from fedmem.audit.mr.stats import mr_figures
from fedmem.audit.mr.suffix_index import IndexConfig, elasticsearch_client
from fedmem.audit.mr.suffix_match import (
    Matches,
    SuffixMatcher,
    data_floor,
    empty_hits,
    matched_shared,
    mr_summary,
    top_ranked,
)
from fedmem.audit.pool import canaries, draw
from fedmem.audit.truth import canary_group
from fedmem.common.fields import build_section, check_fields, option, positive, section
from fedmem.common.io import atomic_write_jsonl_gz
from fedmem.common.stopwatch import Stopwatch


@dataclass
class MRConfig:
    n: int = option(200, "sampled prefixes (and suffixes) per client and arm (the paper: 4000). The default gives the "
                         "excess an interval of about ±2.5 points at the default experiment's MR of a few percent "
                         "(docs/spec.md §3b, Sizes); the paper's tables need experiment=paper's sizes")
    top_k: int = option(10, "retrieved suffixes per generation and client (n')")
    max_new_tokens: int = option(
        256, "a generation runs until the model ends its turn or this many tokens (the report counts the latter)")
    index: IndexConfig = section(IndexConfig, "suffix index (IndexConfig fields)")
    detector: DetectorConfig = section(DetectorConfig, "PAN2014 detector (DetectorConfig fields)")
    drop_incoherent: bool = option(True, "drop generations repeating a 3-gram >= 10x")
    records: bool = option(True, "write per-prefix records to round_<r>/mr_records.jsonl.gz")
    examples_per_pair: int = option(2, "examples per category and client pair in the report (with audit.reveal_text)")
    heldout: int | None = option(
        None, "held-out prefixes per client (the test split) run through the same protocol as MR's control: the "
              "excess of the training prefixes' MR over theirs is what memorization adds; None = n, 0 = no control")

    def __post_init__(self):
        if isinstance(self.index, dict):
            self.index = build_section(IndexConfig, self.index, "audit.mr.index")
        if isinstance(self.detector, dict):
            self.detector = build_section(DetectorConfig, self.detector, "audit.mr.detector")
        check_fields(self, "audit.mr")
        positive(self, "audit.mr", "n", "top_k", "max_new_tokens")
        if self.heldout is not None and self.heldout < 0:
            raise ValueError(f"audit.mr.heldout must be >= 0 or null, got {self.heldout}")
        if self.examples_per_pair < 0:
            raise ValueError(f"audit.mr.examples_per_pair must be >= 0, got {self.examples_per_pair}")

    @property
    def heldout_size(self) -> int:
        """Held-out prefixes per client of the control (0: no control)."""
        return self.n if self.heldout is None else self.heldout


TOTAL_LABELS = {"verbatim": "Verbatim", "idea": "Idea", "paraphrase_high": "Paraphrase (p > 0.5)",
                "paraphrase_low": "Paraphrase (p ≤ 0.5)"}  # the paper's names of the detector's categories


SHARED_RULE = ("a hit is shared when more than half of the suffix characters it matched lie in runs of at least 50 "
               "characters that the training texts of two or more clients, or the public share, hold (exact search "
               "over every client's whole training split)")
OWN_RULE = ("own record: each generation typed by the detector against its own prefix's true continuation, directly, "
            "on both arms (a held-out text is in no index, and putting it there would change BM25's statistics for "
            "one arm only); other records: each client's top n' with the prefix's own suffix left out (the next "
            "suffix takes its place), so both arms search suffixes of other records only; combined: either")
KINDS = ("combined", "own", "other")  # the control's hit kinds (SPEC §3b)
TEXTS = ("all", "distinctive")


def excess(train: dict, heldout: dict) -> dict:
    """Per category and figure (intra, inter, total): training prefixes' MR minus held-out prefixes' MR, with
    Newcombe's 95% interval for a difference of two independent rates (from each rate's Wilson interval), and the
    smallest excess over the held-out rate that this test detects at the two arms' sizes (``mde``, SPEC §12)."""
    out = {}
    for cat, t in train.items():
        h, row = heldout[cat], {}
        for figure in ("intra", "inter", "total"):
            ci_t, ci_h = t[f"{figure}_ci95"], h[f"{figure}_ci95"]
            if t[figure] is None or h[figure] is None or ci_t is None or ci_h is None:
                row[figure] = None
                continue
            lo, hi = newcombe(t[figure], ci_t, h[figure], ci_h)
            row[figure] = {"diff": t[figure] - h[figure], "ci95": [max(-1.0, lo), min(1.0, hi)],
                           "mde": detectable_excess(h[figure], t["n_eff"][figure], h["n_eff"][figure])}
        out[cat] = row
    return out


def union(a: dict[str, list[set[int]]], b: dict[str, list[set[int]]]) -> dict[str, list[set[int]]]:
    """Per category, each prefix's clients hit in ``a`` or ``b``."""
    return {cat: [x | y for x, y in zip(a[cat], b[cat])] for cat in a}


@dataclass
class Arm:
    """One arm of audited prefixes (the ordinary training prefixes, the planted canaries or the held-out prefixes)
    through the protocol: the prefixes whose generation was kept and those dropped as incoherent, the kept ones'
    generations and token ids, and what they matched: ``paper``, the paper's protocol (the training arm: each
    index's top n', the prefix's own record included); ``other``, other records only (each index's top n' with the
    prefix's own suffix left out); ``own``, each generation typed against its own true continuation, and whether that
    match lay in shared text."""

    dropped_samples: list = field(default_factory=list)
    samples: list = field(default_factory=list)
    gens: list[str] = field(default_factory=list)
    outs: list[list[int]] = field(default_factory=list)
    paper: Matches | None = None
    other: Matches | None = None
    own: list[Detection] = field(default_factory=list)
    own_shared: list[bool] = field(default_factory=list)

    @property
    def prefix_clients(self) -> list[int]:
        """Every audited prefix's client; dropped generations stay in the denominators (they induced nothing)."""
        return [s.client for s in self.samples + self.dropped_samples]

    def dropped(self, clients: list[int]) -> list[int]:
        """Per client (in ``clients`` order), how many generations were dropped as incoherent."""
        return [sum(s.client == c for s in self.dropped_samples) for c in clients]

    def padded(self, hits: list[set[int]]) -> list[set[int]]:
        """``hits`` of the kept prefixes, then an empty set for each dropped one (in :attr:`prefix_clients` order)."""
        return hits + [set() for _ in self.dropped_samples]

    def own_hit(self, i: int, cat: str = "any") -> bool:
        """Whether prefix i's generation matched its own record (in ``cat``)."""
        c = self.own[i].category
        return c in CATEGORIES and cat in (c, "any")

    def kinds(self) -> dict[str, dict[str, dict[str, list[set[int]]]]]:
        """``{kind: {text: hits per category}}``: hits on the prefix's own record, on other records, and either, on all
        text and on distinctive text (SPEC §3b)."""
        own = {text: empty_hits(len(self.samples)) for text in TEXTS}
        for i, s in enumerate(self.samples):
            for cat in (*CATEGORIES, "any"):
                if self.own_hit(i, cat):
                    own["all"][cat][i].add(s.client)
                    if not self.own_shared[i]:
                        own["distinctive"][cat][i].add(s.client)
        other = {"all": self.other.hits, "distinctive": self.other.distinctive}
        return {"combined": {t: union(own[t], other[t]) for t in TEXTS}, "own": own, "other": other}


@register
class MemorizationRatio(AuditMethod):
    name = "mr"
    Config = MRConfig
    title = "Cross-client memorization ratio (MR)"
    size_keys = ("n", "top_k")
    runs_apart = True  # its generation request (its prefixes, its cap, its seed) no other method makes
    # The control's excess leads the console line (what memorization adds over text the model never trained on, on
    # exchangeable arms); the paper's MR follows under its own names, then the held-out prefixes' MR and the data's
    # floor. In the sweep tables the paper's columns come first (they are the paper's tables) and the excess beside.
    figures = (
        Figure("excess_intra", "MR_Intra excess", kind="difference", mde=True, console=True, sweep="extra"),
        Figure("excess_inter", "MR_Inter excess", kind="difference", mde=True, console=True, sweep="extra"),
        Figure("excess_total", "MR_Total excess", kind="difference", mde=True, sweep="total"),
        Figure("excess_own_intra", "MR_Intra excess, own record", kind="difference", mde=True, sweep="extra"),
        Figure("excess_other_intra", "MR_Intra excess, other records", kind="difference", mde=True, sweep="extra"),
        Figure("excess_other_inter", "MR_Inter excess, other records", kind="difference", mde=True, sweep="extra"),
        Figure("distinctive_excess_intra", "MR_Intra excess, distinctive text", kind="difference", mde=True,
               sweep="extra"),
        Figure("distinctive_excess_inter", "MR_Inter excess, distinctive text", kind="difference", mde=True,
               sweep="extra"),
        Figure("intra", "MR_Intra", console=True, sweep="answer"),
        Figure("inter", "MR_Inter", console=True, sweep="answer"),
        Figure("intra_minus_inter", "MR_Intra − MR_Inter", kind="difference", sweep="answer"),
        Figure("total", "MR_Total", sweep="total"),
        *(Figure(f"{c}_total", TOTAL_LABELS[c], sweep="total") for c in ("verbatim", "idea", "paraphrase_high",
                                                                          "paraphrase_low")),
        *(Figure(f"heldout_{f}", f"{label}, held-out prefixes", memorization=None, sweep=None)
          for f, label in (("intra", "MR_Intra"), ("inter", "MR_Inter"), ("total", "MR_Total"))),
        *(Figure(f"floor_{f}", f"{label}, the data's floor", memorization=None, sweep=None)
          for f, label in (("intra", "MR_Intra"), ("inter", "MR_Inter"), ("total", "MR_Total"))),
    )

    @classmethod
    def preflight(cls, cfg: MRConfig) -> None:
        if cfg.index.backend == "elasticsearch":  # reachable before a run directory exists or Ray starts
            elasticsearch_client(cfg.index, timeout=10)

    @classmethod
    def samples_needed(cls, cfg: MRConfig) -> dict[str, int]:
        return {"train": cfg.n} | ({"test": cfg.heldout_size} if cfg.heldout_size else {})

    @classmethod
    def size_key(cls, split: str) -> str:
        return "heldout" if split == "test" else "n"

    @classmethod
    def audited_train(cls, cfg: MRConfig, pool: AuditPool) -> set[str]:
        """The ordinary prefixes of ``self.samples`` (the first n of each client's pool, canaries aside) and the
        planted canaries."""
        return {s.id for c in pool.clients for s in draw(pool.train[c], cfg.n)[0] + canaries(pool.train[c])}

    def __init__(self, cfg: MRConfig, pool: AuditPool, detector=None):
        super().__init__(cfg, pool)
        self.samples = {c: draw(pool.train[c], cfg.n)[0] for c in pool.clients}  # ordinary: the ids audited_train names
        self.canaries = [s for c in pool.clients for s in canaries(pool.train[c])]
        # both arms by one rule: the first samples of the split's order (place_common_draw orders both alike)
        self.heldout = {c: draw(pool.test[c], cfg.heldout_size)[0] for c in pool.clients} if cfg.heldout_size else {}
        self.doc = {s.id: (c, i) for c in pool.clients for i, s in enumerate(self.samples[c])}  # where in the index
        self.detector = detector or PlagiarismDetector(cfg.detector)
        self.matcher = SuffixMatcher({c: [s.suffix_text for s in self.samples[c]] for c in pool.clients},
                                     self.detector, cfg.top_k, cfg.index)
        self.reference = self._reference()
        # canary id -> its unique secret parts (record and phone number; names come from a small pool)
        self.secret_parts = {k["id"]: [v for key, v in k.get("secret_parts", {}).items() if key != "name"]
                             for k in pool.ground_truth.get("canaries", [])}
        # once per run, no model: which indexed text is shared (and which held-out and canary continuations hold
        # shared text, for their own-record hits), and the floor of the data itself (SPEC §3b)
        held = [s for c in pool.clients for s in self.heldout.get(c, [])]
        unindexed = held + self.canaries
        found = self.matcher.mark_shared(self._training_texts(), pool.public_texts,
                                         [(s.client, s.suffix_text) for s in unindexed])
        self.own_passages = {s.id: p for s, p in zip(unindexed, found)}
        self.floor = data_floor(self.matcher, [s.client for s in held], [s.suffix_text for s in held],
                                pool.train_sizes) if held else None
        with_shared = self.matcher.shared_suffixes()
        self.shared = {"rule": SHARED_RULE, "suffixes_with_shared": [with_shared[c] for c in pool.clients],
                       "passages": [p | {"text": pool.redact(p["text"])} for p in self.matcher.shared_passages()]}

    def before_training(self) -> dict[str, Any]:
        """What the data alone gives MR, no model involved (``fedmem data check``): the held-out texts left out as
        training text, the data's floor, and the shared passages with the indexed suffixes holding them."""
        if self.floor is None:
            raise ValueError("audit.mr.heldout=0: the data's floor needs held-out texts")
        return {"n": self.cfg.n, "heldout": self.cfg.heldout_size, "top_k": self.cfg.top_k, "floor": self.floor,
                "heldout_trained": [self.pool.heldout_trained.get(c, 0) for c in self.pool.clients],
                "shared": self.shared | {"passages": self.shared["passages"][:10]}}

    def _training_texts(self) -> dict[int, tuple[str, ...]]:
        """Every client's training texts, where shared passages are searched: the run's whole training splits, or
        for a pool built without its data, the pooled texts."""
        if self.pool.training_texts:
            return self.pool.training_texts
        return {c: tuple(s.prefix_text + s.suffix_text for s in self.pool.train[c]) for c in self.pool.clients}

    def _reference(self) -> dict[str, str]:
        """Which reference behaviour each component follows (written into every report)."""
        ix, det = self.cfg.index, self.cfg.detector
        retrieval = (f"Elasticsearch server, match query, BM25 k1={ix.k1} b={ix.b}" if ix.backend == "elasticsearch"
                     else f"embedded: Lucene 9 as Elasticsearch runs it (standard analyzer, one-byte length norm, "
                          f"float32 BM25 k1={ix.k1} b={ix.b}), match query of the generation without stopwords")
        gate = ("entity gate per sentence pair on lowercased sentences, as the seed paper's code" if det.entity_gate
                else "no entity gate (entities only annotate)")
        return {"retrieval": retrieval,
                "detector": f"PAN2014 text alignment with Lee et al.'s typing; {gate}",
                "paraphrase_scorer": self.detector.scorer_name}

    def close(self) -> None:
        self.matcher.close()

    @classmethod
    def round_cost(cls, cfg, clients: int) -> str:
        n = (cfg.n + cfg.heldout_size) * clients  # training prefixes and the control's held-out prefixes
        return (f"{n} generations ({cfg.heldout_size * clients} of them the held-out control) and one per planted "
                f"canary, {n * clients} index queries, up to {n * clients * (cfg.top_k + 1) + n} detector pairs; once "
                f"per run, the shared passages and the data's floor")

    def audit(self, audited: AuditedModel) -> dict[str, Any]:
        clients, clock = self.pool.clients, Stopwatch()
        planned = {"train": [s for c in clients for s in self.samples[c]], "canary": self.canaries,
                   "heldout": [s for c in clients for s in self.heldout.get(c, [])]}
        order = [s for samples in planned.values() for s in samples]
        outs = [o[0] for o in audited.generate([s.prompt_ids for s in order], self.cfg.max_new_tokens)]
        gens = [audited.decode(o) for o in outs]
        clock.lap("generation")
        arms, at = {}, 0
        for name, samples in planned.items():
            arms[name] = self._coherent(samples, gens[at: at + len(samples)], outs[at: at + len(samples)])
            at += len(samples)
        clock.lap("incoherence")
        pairs = self._match(audited, arms, clock)
        train = arms["train"]
        figures = {cat: mr_figures(train.prefix_clients, train.padded(h), self.pool.train_sizes)
                   for cat, h in train.paper.hits.items()}
        section = self._paper_section(audited, arms, figures, outs[: len(planned["train"])]) | {"pairs_checked": pairs}
        if planned["heldout"]:
            section["control"] = self._control(arms)
            section["headline"] |= self._control_headline(section["control"])
        if self.cfg.records and audited.out_dir:
            self._write_records(audited.out_dir, arms)
        clock.lap("figures")
        section["seconds"] = clock.laps  # where the round's time went, stage by stage (moved to the timings)
        return section

    def _coherent(self, samples, gens: list[str], outs: list[list[int]]) -> Arm:
        """The prefixes whose generation passes the incoherence filter, and those dropped."""
        arm = Arm()
        for s, g, o in zip(samples, gens, outs):
            if self.cfg.drop_incoherent and is_incoherent(g):
                arm.dropped_samples.append(s)
            else:
                arm.samples.append(s)
                arm.gens.append(g)
                arm.outs.append(o)
        return arm

    def _match(self, audited: AuditedModel, arms: dict[str, Arm], clock: Stopwatch) -> int:
        """Retrieval and typing for every arm, one detector pass over every distinct (generation, suffix) pair: the
        training and held-out arms' generations against each index (top n' + 1, so that the own suffix can be left
        out), and every generation against its own true continuation. Returns the number of pairs typed."""
        searched = [arms["train"], arms["heldout"]]
        texts = [g for arm in searched for g in arm.gens]
        train_n = len(arms["train"].gens)
        leave_out = {i: self.doc[s.id] for i, s in enumerate(arms["train"].samples)}  # a training prefix's own suffix
        owners = self.matcher.retrieve(texts, k=self.cfg.top_k + 1)
        clock.lap("retrieval")
        paper = [o for o in top_ranked(owners, self.cfg.top_k) if o[0] < train_n]
        other = top_ranked(owners, self.cfg.top_k, leave_out)
        pairs: dict[tuple, tuple[str, str]] = {}  # one detector call per distinct pair
        for i, k, doc in paper + other:
            pairs[i, k, doc] = (texts[i], self.matcher.suffixes[k][doc])
        own_keys = {}
        for name, arm in arms.items():
            for i, (s, g) in enumerate(zip(arm.samples, arm.gens)):
                key = (i, *self.doc[s.id]) if name == "train" else (name, i)
                own_keys[name, i] = key
                pairs.setdefault(key, (g, s.suffix_text))
        self.detector.reset_stats()
        found = dict(zip(pairs, self.matcher.detect(list(pairs.values()), audited.progress, "mr detector")))
        clock.laps.update({f"detector_{k}": round(v, 3) for k, v in self.detector.timings.items()})
        clock.lap("detector")
        arms["train"].paper = self.matcher.collect(train_n, paper, [found[o] for o in paper])
        for offset, arm in ((0, arms["train"]), (train_n, arms["heldout"])):
            mine = [(i - offset, k, doc) for i, k, doc in other if offset <= i < offset + len(arm.gens)]
            arm.other = self.matcher.collect(len(arm.gens), mine, [found[i + offset, k, doc] for i, k, doc in mine])
        for name, arm in arms.items():
            arm.own = [found[own_keys[name, i]] for i in range(len(arm.samples))]
            arm.own_shared = [matched_shared(det, self._own_passages(s)) for s, det in zip(arm.samples, arm.own)]
        return len(pairs)

    def _own_passages(self, sample) -> list:
        """The shared passages of a prefix's own true continuation."""
        if sample.id in self.doc:
            return self.matcher.shared.get(self.doc[sample.id], [])
        return self.own_passages.get(sample.id, [])

    def _paper_section(self, audited: AuditedModel, arms: dict[str, Arm], figures: dict,
                       outs: list[list[int]]) -> dict[str, Any]:
        """MR as the paper computes it (SPEC §3), from the ordinary training prefixes (``figures``: their
        ``mr_figures`` per category): the matrix, the aggregates per category with their intervals, and the canaries
        against their ground truth."""
        pool, side = self.pool, arms["train"]
        hits = side.paper.hits
        any_, unc = figures["any"], figures["any"]["uncertainty"]
        headline = {"intra": any_["intra"], "intra_ci95": unc["intra"]["ci95"],
                    "inter": any_["inter"], "inter_ci95": (unc.get("inter") or {}).get("ci95"),
                    "total": any_["total"], "total_ci95": unc["total"]["ci95"]}
        if any_["intra_minus_inter"]:  # a sweep's tables average it over seeds; its standard error is in the section
            headline |= {"intra_minus_inter": any_["intra_minus_inter"]["diff"],
                         "intra_minus_inter_ci95": any_["intra_minus_inter"]["ci95"]}
        for c in CATEGORIES:
            headline |= {f"{c}_total": figures[c]["total"],
                         f"{c}_total_ci95": figures[c]["uncertainty"]["total"]["ci95"]}
        canary = arms["canary"]
        return {
            "config": asdict(self.cfg),
            # MR_Total is MR_TotalFL for a federated run and MR_TotalCL for the centralized baseline
            "setting": audited.label,
            "reference": self.reference,
            "headline": headline,
            "clients": any_["clients"],
            "n": any_["n"],
            "weights": any_["weights"],
            "matrix": {cat: f["matrix"] for cat, f in figures.items()},
            "intra": {cat: f["intra"] for cat, f in figures.items()},
            "inter": {cat: f["inter"] for cat, f in figures.items()},
            "intra_minus_inter": {cat: f["intra_minus_inter"] for cat, f in figures.items()},
            "uncertainty": {cat: f["uncertainty"] for cat, f in figures.items()},
            "inter_per_client": {cat: f["inter_per_client"] for cat, f in figures.items()},
            "total": {cat: f["total"] for cat, f in figures.items()},
            "incoherent_dropped": side.dropped(pool.clients),
            "generation": self._generation_stats(audited, outs),
            "ground_truth": self._ground_truth(side, canary),
            "examples": self._examples(side),
            # every audited prefix, an incoherent generation's too: it induced nothing; a canary's hit is on its own
            # record (it is in no index)
            "samples": [{"id": s.id, "client": s.client, "hit_own": s.client in hits["any"][i],
                         "hit_other": bool(hits["any"][i] - {s.client}), "tags": dict(s.tags)}
                        for i, s in enumerate(side.samples)]
            + [{"id": s.id, "client": s.client, "hit_own": canary.own_hit(i), "hit_other": False,
                "tags": dict(s.tags)} for i, s in enumerate(canary.samples)]
            + [{"id": s.id, "client": s.client, "hit_own": False, "hit_other": False, "tags": dict(s.tags),
                "incoherent": True} for s in side.dropped_samples + canary.dropped_samples],
        }

    def _control(self, arms: dict[str, Arm]) -> dict[str, Any]:
        """MR's control on exchangeable arms (SPEC §3b): for hits on the prefix's own record, on other records and
        either, on all text and on distinctive text, the training and held-out prefixes' MR and the excess; the
        data's floor and the shared passages."""
        sizes, train, held = self.pool.train_sizes, arms["train"], arms["heldout"]
        kinds = {"train": train.kinds(), "heldout": held.kinds()}

        def summary(arm: Arm, hits) -> dict:
            return mr_summary(arm.prefix_clients, {cat: arm.padded(h) for cat, h in hits.items()}, sizes)

        out: dict[str, Any] = {
            "heldout_n": [len(self.heldout[c]) for c in self.pool.clients],
            "heldout_incoherent_dropped": held.dropped(self.pool.clients),
            "heldout_trained": [self.pool.heldout_trained.get(c, 0) for c in self.pool.clients],
            "train_elsewhere": [self.pool.train_elsewhere.get(c, 0) for c in self.pool.clients],
            "rule": OWN_RULE,
        }
        for kind in KINDS:
            out[kind] = {}
            for text in TEXTS:
                t, h = summary(train, kinds["train"][kind][text]), summary(held, kinds["heldout"][kind][text])
                out[kind][text] = {"train": t, "heldout": h, "excess": excess(t, h)}
        return out | {"floor": self.floor, "shared": self.shared}

    @staticmethod
    def _control_headline(control: dict[str, Any]) -> dict[str, Any]:
        out = {}

        def put(key: str, kind: str, text: str, figure: str) -> None:
            e = control[kind][text]["excess"]["any"][figure]
            if e is not None:
                out.update({key: e["diff"], f"{key}_ci95": e["ci95"], f"{key}_mde": e["mde"]})

        for figure in ("intra", "inter", "total"):
            put(f"excess_{figure}", "combined", "all", figure)
            put(f"excess_other_{figure}", "other", "all", figure)
            put(f"distinctive_excess_{figure}", "combined", "distinctive", figure)
            held = control["combined"]["all"]["heldout"]["any"]
            if held[figure] is not None:
                out |= {f"heldout_{figure}": held[figure], f"heldout_{figure}_ci95": held[f"{figure}_ci95"]}
            floor = (control.get("floor") or {}).get("all", {}).get("any", {})
            if floor.get(figure) is not None:
                out |= {f"floor_{figure}": floor[figure], f"floor_{figure}_ci95": floor[f"{figure}_ci95"]}
        put("excess_own_intra", "own", "all", "intra")  # a prefix's own record is its own client's: no inter
        return out

    def _generation_stats(self, audited: AuditedModel, outs: list[list[int]]) -> dict:
        """How the generations ended (the model's end of turn, or the cap), their lengths, and the decoding values
        ``generate`` used."""
        from fedmem.engine.generation import hit_cap

        cap = self.cfg.max_new_tokens
        capped = sum(hit_cap(o, cap) for o in outs)
        lengths = sorted(len(o) for o in outs)
        return {"max_new_tokens": cap, "ended_turn": len(outs) - capped, "hit_cap": capped,
                "hit_cap_rate": capped / len(outs) if outs else None,
                "median_tokens": lengths[len(lengths) // 2] if lengths else None,
                "mean_tokens": sum(lengths) / len(lengths) if lengths else None,
                "decoding": audited.decoding_values()}

    def _ground_truth(self, side: Arm, canary: Arm) -> dict:
        """The planted truth: per canary copy count, how many canaries' generations matched their own record
        verbatim / in any category, and how many contain a unique part of the canary's secret (its record number or
        phone number); the ordinary prefixes that end in shared boilerplate and what they hit.

        The secret count needs no detector: a verbatim hit can also come from text a canary shares with others (its
        closing is its specialty's, shared with that specialty's public record notes and canaries), a leaked secret
        part cannot.
        """
        out: dict[str, Any] = {}
        for i, (s, gen) in enumerate(zip(canary.samples, canary.gens)):
            row = out.setdefault("canary_by_copies", {}).setdefault(
                canary_group(s.tags), {"n": 0, "verbatim": 0, "any": 0, "secret_leaked": 0, "incoherent": 0})
            row["n"] += 1
            row["verbatim"] += canary.own_hit(i, "verbatim")
            row["any"] += canary.own_hit(i)
            row["secret_leaked"] += any(part in gen for part in self.secret_parts.get(s.tags["canary"], []))
        for s in canary.dropped_samples:  # dropped as incoherent: audited, nothing leaked
            row = out.setdefault("canary_by_copies", {}).setdefault(
                canary_group(s.tags), {"n": 0, "verbatim": 0, "any": 0, "secret_leaked": 0, "incoherent": 0})
            row["n"] += 1
            row["incoherent"] += 1
        hits, distinctive = side.paper.hits, side.paper.distinctive
        for i, s in enumerate(side.samples):
            if s.tags.get("generic"):
                row = out.setdefault("generic", {"n": 0, "any": 0, "inter": 0, "distinctive": 0})
                row["n"] += 1
                row["any"] += bool(hits["any"][i])
                row["inter"] += bool(hits["any"][i] - {s.client})
                row["distinctive"] += bool(distinctive["any"][i])
        return out

    def _examples(self, side: Arm) -> list[dict]:
        """Up to ``examples_per_pair`` detected pairs per category and (prefix client, suffix client), with their
        text: only with ``audit.reveal_text`` (a redacted example says nothing a reader can check)."""
        if not self.pool.reveal_text or not self.cfg.examples_per_pair:
            return []
        out, taken = [], {}
        for s, gen, matched in zip(side.samples, side.gens, side.paper.matched):
            for k, doc, det in matched:
                key = (det.category, s.client, k)
                if taken.get(key, 0) < self.cfg.examples_per_pair:
                    taken[key] = taken.get(key, 0) + 1
                    out.append({"category": det.category, "prefix_client": s.client, "suffix_client": k,
                                "prefix_id": s.id, "suffix_id": self.samples[k][doc].id, "prefix": s.prefix_text,
                                "generation": gen, "suffix": self.samples[k][doc].suffix_text,
                                "spans": [[c.src_start, c.src_end, c.susp_start, c.susp_end] for c in det.cases]})
        order = {c: n for n, c in enumerate(CATEGORIES)}
        return sorted(out, key=lambda e: (order[e["category"]], e["prefix_client"], e["suffix_client"]))

    def _write_records(self, out_dir: str, arms: dict[str, Arm]) -> None:
        """One line per audited prefix (``split``: train, or test for the control's held-out prefixes; ``canary``
        for a planted one): what it hit in the indexes (a training prefix: the paper's protocol; a held-out prefix:
        other records, as no index holds its own), with each match's aligned spans (character offsets
        ``[generation start, end, suffix start, end]``) and whether the matched text is shared; its own record's
        typing; how its generation stopped (``end_of_turn`` or ``cap``) and its length in tokens; with
        ``audit.reveal_text`` also the exact prompt text the model saw (special tokens included), the prefix, the
        generation and every matched suffix, so a reader can see what the model produced and what it matched."""
        from fedmem.engine.generation import hit_cap

        reveal, tok, cap = self.pool.reveal_text, self.pool.tokenizer, self.cfg.max_new_tokens

        def match(k, doc, det) -> dict:
            suffix = self.samples[k][doc]
            row = {"suffix": suffix.id, "client": k, "category": det.category,
                   "shared": self.matcher.is_shared(k, doc, det),
                   "spans": [[c.src_start, c.src_end, c.susp_start, c.susp_end] for c in det.cases]}
            return row | ({"suffix_text": suffix.suffix_text} if reveal else {})

        def rows(name: str, arm: Arm):
            matches = arm.paper or arm.other
            for i, (s, gen, o) in enumerate(zip(arm.samples, arm.gens, arm.outs)):
                yield {"prefix": s.id, "client": s.client, "split": s.split, "canary": name == "canary",
                       "stop": "cap" if hit_cap(o, cap) else "end_of_turn", "generation_tokens": len(o),
                       **({"prompt_text": tok.decode(list(s.prompt_ids), skip_special_tokens=False),
                           "prefix_text": s.prefix_text, "generation": gen} if reveal else {}),
                       "matches": [match(*m) for m in matches.matched[i]] if matches else [],
                       "own_record": {"category": arm.own[i].category, "shared": arm.own_shared[i]},
                       "hit_clients": {cat: sorted(h[i]) for cat, h in matches.hits.items() if h[i]} if matches
                       else {}}

        atomic_write_jsonl_gz(os.path.join(out_dir, "mr_records.jsonl.gz"),
                              (row for name, arm in arms.items() for row in rows(name, arm)))

    def truth_rows(self, section: dict) -> list[dict]:
        """A planted canary counts as found when its generation matched its own record."""
        return [{"id": s["id"], "tags": s.get("tags") or {}, "split": "train", "score": float(s["hit_own"]),
                 "decision": bool(s["hit_own"])} for s in section.get("samples", [])]

    def verdicts(self, section: dict) -> dict[str, list[dict]]:
        """Beside the other methods, a prefix is flagged when its generation hit any client's text."""
        return {self.name: [{"id": s["id"], "tags": s.get("tags") or {}, "split": "train",
                             "score": float(s["hit_own"] or s["hit_other"]),
                             "decision": bool(s["hit_own"] or s["hit_other"])} for s in section.get("samples", [])]}
