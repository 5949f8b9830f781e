"""Cross-client memorization ratio MR(j→k) as a per-round audit method (SPEC §3), with its control (SPEC §3b).

Per round: one generation pass over every client's sampled training prefixes and, for the control, as many held-out
prefixes (shared through ``RoundContext``), the incoherence filter, BM25 top-k over every client's training-suffix
index and one batched detector call over all (generation, retrieved suffix) pairs (``fedmem.audit.suffix_match``),
then the paper's MR figures from the training prefixes and, beside them, the held-out prefixes' MR, the excess and
MR on distinctive text. Built once per run: the indexes (the samples are fixed), the shared passages and the data's
floor, which need no model.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from fedmem.audit.base import AuditMethod, AuditRun, Figure, RoundContext, register
from fedmem.audit.detector import (
    CATEGORIES,
    DetectorConfig,
    PlagiarismDetector,
    is_incoherent,
)
from fedmem.audit.mr_stats import mr_figures, newcombe
from fedmem.audit.suffix_index import IndexConfig, elasticsearch_client
from fedmem.audit.suffix_match import (
    Matches,
    SuffixMatcher,
    data_floor,
    figure_summary,
    mr_summary,
)
from fedmem.audit.truth import canary_group
from fedmem.common.fields import build_section, check_fields, option, positive, section
from fedmem.common.io import atomic_write_jsonl_gz
from fedmem.engine.generation import decoding_used, hit_cap


@dataclass
class MRConfig:
    n: int = option(600, "sampled prefixes (and suffixes) per client (the paper: 4000)")
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


SHARED_RULE = ("a hit is shared when more than half of the suffix characters it matched lie in verbatim runs of at "
               "least 50 characters that another client's indexed suffixes or the public share also hold")


def excess(train: dict, heldout: dict) -> dict:
    """Per category and figure (intra, inter, total): training prefixes' MR minus held-out prefixes' MR, with
    Newcombe's 95% interval for a difference of two independent rates (from each rate's Wilson interval)."""
    out = {}
    for cat, t in train.items():
        h, row = heldout[cat], {}
        for figure in ("intra", "inter", "total"):
            ci_t, ci_h = t[f"{figure}_ci95"], h[f"{figure}_ci95"]
            if t[figure] is None or h[figure] is None or ci_t is None or ci_h is None:
                row[figure] = None
                continue
            lo, hi = newcombe(t[figure], ci_t, h[figure], ci_h)
            row[figure] = {"diff": t[figure] - h[figure], "ci95": [max(-1.0, lo), min(1.0, hi)]}
        out[cat] = row
    return out


@dataclass
class Side:
    """One set of audited prefixes (training or held-out) through the protocol: the prefixes whose generation was
    kept, their generations and token ids, the prefixes whose generation was dropped as incoherent, and what the
    kept ones matched."""

    dropped_samples: list = field(default_factory=list)
    samples: list = field(default_factory=list)
    gens: list[str] = field(default_factory=list)
    outs: list[list[int]] = field(default_factory=list)
    matches: Matches | None = None

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


class Stopwatch:
    """Seconds per named stage: ``lap(name)`` books the time since the previous lap."""

    def __init__(self):
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self._last, 3)
        self._last = now


@register
class MemorizationRatio(AuditMethod):
    name = "mr"
    Config = MRConfig
    title = "Cross-client memorization ratio (MR)"
    size_keys = ("n", "top_k")
    # The control's excess leads the console line (what memorization adds over text the model never trained on); the
    # paper's MR follows under its own names, then the held-out prefixes' MR and the data's floor. In the sweep
    # tables the paper's columns come first (they are the paper's tables) and the excess beside them.
    figures = (
        Figure("excess_intra", "MR_Intra excess", kind="difference", console=True, sweep="extra"),
        Figure("excess_inter", "MR_Inter excess", kind="difference", console=True, sweep="extra"),
        Figure("excess_total", "MR_Total excess", kind="difference", sweep="total"),
        Figure("distinctive_excess_intra", "MR_Intra excess, distinctive text", kind="difference", sweep="extra"),
        Figure("distinctive_excess_inter", "MR_Inter excess, distinctive text", kind="difference", sweep="extra"),
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
    def audited_train(cls, cfg: MRConfig, run: AuditRun) -> set[str]:
        """The prefixes of ``self.samples``: the first n of each client's pool, canaries first."""
        return {s.id for c in run.clients for s in run.train[c][: cfg.n]}

    def __init__(self, cfg: MRConfig, run: AuditRun, detector=None):
        super().__init__(cfg, run)
        self.samples = {c: run.train[c][: cfg.n] for c in run.clients}  # the ids audited_train names
        self.heldout = {c: run.test[c][: cfg.heldout_size] for c in run.clients} if cfg.heldout_size else {}
        self.detector = detector or PlagiarismDetector(cfg.detector)
        self.matcher = SuffixMatcher({c: [s.suffix_text for s in self.samples[c]] for c in run.clients},
                                     self.detector, cfg.top_k, cfg.index)
        self.reference = self._reference()
        # canary id -> its unique secret parts (record and phone number; names come from a small pool)
        self.secret_parts = {k["id"]: [v for key, v in k.get("secret_parts", {}).items() if key != "name"]
                             for k in run.ground_truth.get("canaries", [])}
        # once per run, no model: which indexed text is shared, and the floor of the data itself (SPEC §3b)
        self.matcher.find_shared(run.public_texts)
        held = [s for c in run.clients for s in self.heldout.get(c, [])]
        self.floor = data_floor(self.matcher, [s.client for s in held], [s.suffix_text for s in held],
                                run.train_sizes) if held else None
        with_shared = self.matcher.shared_suffixes()
        self.shared = {"rule": SHARED_RULE, "suffixes_with_shared": [with_shared[c] for c in run.clients],
                       "passages": [p | {"text": run.redact(p["text"])} for p in self.matcher.shared_passages()]}

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
    def work(cls, cfg, clients: int) -> str:
        n = (cfg.n + cfg.heldout_size) * clients  # training prefixes and the control's held-out prefixes
        return (f"{n} generations ({cfg.heldout_size * clients} of them the held-out control), {n * clients} index "
                f"queries, up to {n * clients * cfg.top_k} detector pairs; once per run, the shared passages and the "
                f"data's floor")

    def audit(self, ctx: RoundContext) -> dict[str, Any]:
        clients, clock = self.run.clients, Stopwatch()
        train = [s for c in clients for s in self.samples[c]]
        held = [s for c in clients for s in self.heldout.get(c, [])]
        outs = [o[0] for o in ctx.generate([s.prompt_ids for s in train + held], self.cfg.max_new_tokens)]
        gens = [ctx.decode(o) for o in outs]
        clock.lap("generation")
        sides = {"train": self._coherent(train, gens[: len(train)], outs[: len(train)]),
                 "heldout": self._coherent(held, gens[len(train):], outs[len(train):])}
        clock.lap("incoherence")
        texts = [g for side in sides.values() for g in side.gens]
        owners = self.matcher.retrieve(texts)
        clock.lap("retrieval")
        self.detector.reset_stats()
        detections = self.matcher.detect(self.matcher.pairs(texts, owners), ctx.progress, "mr detector")
        clock.laps.update({f"detector_{k}": round(v, 3) for k, v in self.detector.timings.items()})
        clock.lap("detector")
        offset = 0
        for side in sides.values():  # each side's texts, numbered from 0 again
            mine = [((i - offset, k, doc), d) for (i, k, doc), d in zip(owners, detections)
                    if offset <= i < offset + len(side.gens)]
            side.matches = self.matcher.collect(len(side.gens), [o for o, _ in mine], [d for _, d in mine])
            offset += len(side.gens)
        kept = sides["train"]
        figures = {cat: mr_figures(kept.prefix_clients, kept.padded(h), self.run.train_sizes)
                   for cat, h in kept.matches.hits.items()}
        section = self._paper_section(ctx, kept, figures, outs[: len(train)], len(owners))
        if held:
            section["control"] = self._control(sides, figures)
            section["headline"] |= self._control_headline(section["control"])
        if self.cfg.records and ctx.out_dir:
            self._write_records(ctx.out_dir, sides)
        clock.lap("figures")
        section["seconds"] = clock.laps  # where the round's time went, stage by stage (moved to the timings)
        return section

    def _coherent(self, samples, gens: list[str], outs: list[list[int]]) -> Side:
        """The prefixes whose generation passes the incoherence filter, and those dropped."""
        side = Side()
        for s, g, o in zip(samples, gens, outs):
            if self.cfg.drop_incoherent and is_incoherent(g):
                side.dropped_samples.append(s)
            else:
                side.samples.append(s)
                side.gens.append(g)
                side.outs.append(o)
        return side

    def _paper_section(self, ctx: RoundContext, side: Side, figures: dict, outs: list[list[int]],
                       pairs: int) -> dict[str, Any]:
        """MR as the paper computes it (SPEC §3), from the training prefixes (``figures``: their ``mr_figures`` per
        category): the matrix, the aggregates per category with their intervals, and what the run's ground truth
        says about the hits."""
        run, hits = self.run, side.matches.hits
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
        return {
            "config": asdict(self.cfg),
            # MR_Total is MR_TotalFL for a federated run and MR_TotalCL for the centralized baseline
            "setting": ctx.label,
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
            "incoherent_dropped": side.dropped(run.clients),
            "generation": self._generation_stats(ctx, outs),
            "pairs_checked": pairs,
            "ground_truth": self._ground_truth(side),
            "examples": self._examples(side),
            # every audited prefix, an incoherent generation's too: it induced nothing
            "samples": [{"id": s.id, "client": s.client, "hit_own": s.client in hits["any"][i],
                         "hit_other": bool(hits["any"][i] - {s.client}), "tags": dict(s.tags)}
                        for i, s in enumerate(side.samples)]
            + [{"id": s.id, "client": s.client, "hit_own": False, "hit_other": False, "tags": dict(s.tags),
                "incoherent": True} for s in side.dropped_samples],
        }

    def _control(self, sides: dict[str, Side], train_figures: dict) -> dict[str, Any]:
        """MR's control (SPEC §3b): the held-out prefixes' MR, the excess of the training prefixes' over it (their
        ``mr_figures`` per category: ``train_figures``), the same on distinctive text, the data's floor and the shared
        passages."""
        sizes, train, held = self.run.train_sizes, sides["train"], sides["heldout"]

        def summary(side: Side, hits) -> dict:
            return mr_summary(side.prefix_clients, {cat: side.padded(h) for cat, h in hits.items()}, sizes)

        figures = {"train": {cat: figure_summary(f) for cat, f in train_figures.items()},
                   "heldout": summary(held, held.matches.hits),
                   "distinctive_train": summary(train, train.matches.distinctive),
                   "distinctive_heldout": summary(held, held.matches.distinctive)}
        return {
            "heldout_n": [len(self.heldout[c]) for c in self.run.clients],
            "heldout_incoherent_dropped": held.dropped(self.run.clients),
            "train": figures["train"],  # the paper's MR again, in the control's shape
            "heldout": figures["heldout"],
            "excess": excess(figures["train"], figures["heldout"]),
            "distinctive": {"train": figures["distinctive_train"], "heldout": figures["distinctive_heldout"],
                            "excess": excess(figures["distinctive_train"], figures["distinctive_heldout"])},
            "floor": self.floor,
            "shared": self.shared,
        }

    @staticmethod
    def _control_headline(control: dict[str, Any]) -> dict[str, Any]:
        out = {}
        held = control["heldout"]["any"]
        for figure in ("intra", "inter", "total"):
            e, d = control["excess"]["any"][figure], control["distinctive"]["excess"]["any"][figure]
            if e is not None:
                out |= {f"excess_{figure}": e["diff"], f"excess_{figure}_ci95": e["ci95"],
                        f"distinctive_excess_{figure}": d["diff"], f"distinctive_excess_{figure}_ci95": d["ci95"],
                        f"heldout_{figure}": held[figure], f"heldout_{figure}_ci95": held[f"{figure}_ci95"]}
            floor = (control.get("floor") or {}).get("all", {}).get("any", {})
            if floor.get(figure) is not None:
                out |= {f"floor_{figure}": floor[figure], f"floor_{figure}_ci95": floor[f"{figure}_ci95"]}
        return out

    def _generation_stats(self, ctx: RoundContext, outs: list[list[int]]) -> dict:
        """How the generations ended (the model's end of turn, or the cap), their lengths, and the decoding values
        ``generate`` used."""
        cap = self.cfg.max_new_tokens
        capped = sum(hit_cap(o, cap) for o in outs)
        lengths = sorted(len(o) for o in outs)
        return {"max_new_tokens": cap, "ended_turn": len(outs) - capped, "hit_cap": capped,
                "hit_cap_rate": capped / len(outs) if outs else None,
                "median_tokens": lengths[len(lengths) // 2] if lengths else None,
                "mean_tokens": sum(lengths) / len(lengths) if lengths else None,
                "decoding": decoding_used(ctx.model, self.run.decoding)}

    def _ground_truth(self, side: Side) -> dict:
        """Per canary copy count: how many canary prefixes hit their own client verbatim / in any category, and
        how many generations contain a unique part of the canary's secret (its record number or phone number).

        The last count needs no detector and no retrieval: a verbatim hit can also come from text a canary shares
        with others (its closing is its specialty's, shared with that specialty's public record notes and canaries),
        a leaked secret part cannot.
        """
        out: dict[str, Any] = {}
        hits, distinctive = side.matches.hits, side.matches.distinctive
        for i, (s, gen) in enumerate(zip(side.samples, side.gens)):
            if "canary" in s.tags:
                row = out.setdefault("canary_by_copies", {}).setdefault(
                    canary_group(s.tags), {"n": 0, "verbatim": 0, "any": 0, "secret_leaked": 0})
                row["n"] += 1
                row["verbatim"] += s.client in hits["verbatim"][i]
                row["any"] += s.client in hits["any"][i]
                row["secret_leaked"] += any(part in gen for part in self.secret_parts.get(s.tags["canary"], []))
            elif s.tags.get("generic"):
                row = out.setdefault("generic", {"n": 0, "any": 0, "inter": 0, "distinctive": 0})
                row["n"] += 1
                row["any"] += bool(hits["any"][i])
                row["inter"] += bool(hits["any"][i] - {s.client})
                row["distinctive"] += bool(distinctive["any"][i])
        return out

    def _examples(self, side: Side) -> list[dict]:
        """Up to ``examples_per_pair`` detected pairs per category and (prefix client, suffix client), with their
        text: only with ``audit.reveal_text`` (a redacted example says nothing a reader can check)."""
        if not self.run.reveal_text or not self.cfg.examples_per_pair:
            return []
        out, taken = [], {}
        for s, gen, matched in zip(side.samples, side.gens, side.matches.matched):
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

    def _write_records(self, out_dir: str, sides: dict[str, Side]) -> None:
        """One line per audited prefix (``split``: train, or test for the control's held-out prefixes): what it hit,
        with each match's aligned spans (character offsets ``[generation start, end, suffix start, end]``) and
        whether the matched text is shared, how its generation stopped (``end_of_turn`` or ``cap``) and its length in
        tokens; with ``audit.reveal_text`` also the exact prompt text the model saw (special tokens included), the
        prefix, the generation and every matched suffix, so a reader can see what the model produced and what it
        matched."""
        reveal, tok, cap = self.run.reveal_text, self.run.tokenizer, self.cfg.max_new_tokens

        def match(k, doc, det) -> dict:
            suffix = self.samples[k][doc]
            row = {"suffix": suffix.id, "client": k, "category": det.category,
                   "shared": self.matcher.is_shared(k, doc, det),
                   "spans": [[c.src_start, c.src_end, c.susp_start, c.susp_end] for c in det.cases]}
            return row | ({"suffix_text": suffix.suffix_text} if reveal else {})

        def rows(side: Side):
            hits = side.matches.hits
            for i, (s, gen, o) in enumerate(zip(side.samples, side.gens, side.outs)):
                yield {"prefix": s.id, "client": s.client, "split": s.split,
                       "stop": "cap" if hit_cap(o, cap) else "end_of_turn", "generation_tokens": len(o),
                       **({"prompt_text": tok.decode(list(s.prompt_ids), skip_special_tokens=False),
                           "prefix_text": s.prefix_text, "generation": gen} if reveal else {}),
                       "matches": [match(*m) for m in side.matches.matched[i]],
                       "hit_clients": {cat: sorted(h[i]) for cat, h in hits.items() if h[i]}}

        atomic_write_jsonl_gz(os.path.join(out_dir, "mr_records.jsonl.gz"),
                              (row for side in sides.values() for row in rows(side)))

    def truth_rows(self, section: dict) -> list[dict]:
        """A planted canary counts as found when its generation hit its own client's text."""
        return [{"id": s["id"], "tags": s.get("tags") or {}, "split": "train", "score": float(s["hit_own"]),
                 "decision": bool(s["hit_own"])} for s in section.get("samples", [])]

    def verdicts(self, section: dict) -> dict[str, list[dict]]:
        """Beside the other methods, a prefix is flagged when its generation hit any client's text."""
        return {self.name: [{"id": s["id"], "tags": s.get("tags") or {}, "split": "train",
                             "score": float(s["hit_own"] or s["hit_other"]),
                             "decision": bool(s["hit_own"] or s["hit_other"])} for s in section.get("samples", [])]}

