"""Cross-client memorization ratio MR(j→k) as a per-round audit method (SPEC §3).

Per round: one generation pass over every client's sampled prefixes (shared through ``RoundContext``), the
incoherence filter, BM25 top-k over every client's suffix index (built once per run: the samples are fixed),
one batched detector call over all (generation, retrieved suffix) pairs, then the MR figures per category.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any

from fedmem.audit.base import AuditMethod, AuditRun, Figure, RoundContext, register
from fedmem.audit.detector import CATEGORIES, DetectorConfig, PlagiarismDetector, is_incoherent
from fedmem.audit.mr_stats import mr_figures
from fedmem.audit.suffix_index import IndexConfig, elasticsearch_client, query_terms, suffix_index
from fedmem.audit.truth import canary_group
from fedmem.config import build_section, check_fields, option, positive, section
from fedmem.generation import decoding_used, hit_cap
from fedmem.io import atomic_write_jsonl_gz


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

    def __post_init__(self):
        if isinstance(self.index, dict):
            self.index = build_section(IndexConfig, self.index, "audit.mr.index")
        if isinstance(self.detector, dict):
            self.detector = build_section(DetectorConfig, self.detector, "audit.mr.detector")
        check_fields(self, "audit.mr")
        positive(self, "audit.mr", "n", "top_k", "max_new_tokens")
        if self.examples_per_pair < 0:
            raise ValueError(f"audit.mr.examples_per_pair must be >= 0, got {self.examples_per_pair}")


TOTAL_LABELS = {"verbatim": "Verbatim", "idea": "Idea", "paraphrase_high": "Paraphrase (p > 0.5)",
                "paraphrase_low": "Paraphrase (p ≤ 0.5)"}  # the paper's names of the detector's categories


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
    figures = (
        Figure("intra", "MR_Intra", console=True, sweep="answer"),
        Figure("inter", "MR_Inter", console=True, sweep="answer"),
        Figure("intra_minus_inter", "MR_Intra − MR_Inter", kind="difference", console=True, sweep="answer"),
        Figure("total", "MR_Total", sweep="total"),
        *(Figure(f"{c}_total", TOTAL_LABELS[c], sweep="total") for c in ("verbatim", "idea", "paraphrase_high",
                                                                          "paraphrase_low")),
    )

    @classmethod
    def preflight(cls, cfg: MRConfig) -> None:
        if cfg.index.backend == "elasticsearch":  # reachable before a run directory exists or Ray starts
            elasticsearch_client(cfg.index, timeout=10)

    @classmethod
    def samples_needed(cls, cfg: MRConfig) -> dict[str, int]:
        return {"train": cfg.n}

    def __init__(self, cfg: MRConfig, run: AuditRun, detector=None):
        super().__init__(cfg, run)
        self.samples = {c: run.train[c][: cfg.n] for c in run.clients}
        self.indexes = {c: suffix_index([s.suffix_text for s in self.samples[c]], cfg.index, name=f"c{c}")
                        for c in run.clients}
        self.detector = detector or PlagiarismDetector(cfg.detector)
        self.reference = self._reference()
        # canary id -> its unique secret parts (record and phone number; names come from a small pool)
        self.secret_parts = {k["id"]: [v for key, v in k.get("secret_parts", {}).items() if key != "name"]
                             for k in run.ground_truth.get("canaries", [])}

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
        for ix in self.indexes.values():
            ix.close()

    @classmethod
    def work(cls, cfg, clients: int) -> str:
        n = cfg.n * clients
        return f"{n} generations, {n * clients} index queries, up to {n * clients * cfg.top_k} detector pairs"

    def audit(self, ctx: RoundContext) -> dict[str, Any]:
        run, clients = self.run, self.run.clients
        clock = Stopwatch()
        prefixes = [s for c in clients for s in self.samples[c]]
        cap = self.cfg.max_new_tokens
        outs = [o[0] for o in ctx.generate([s.prompt_ids for s in prefixes], cap)]
        gens = [ctx.decode(o) for o in outs]
        clock.lap("generation")
        dropped = {c: 0 for c in clients}
        keep, kept_outs = [], []
        for s, g, o in zip(prefixes, gens, outs):
            if self.cfg.drop_incoherent and is_incoherent(g):
                dropped[s.client] += 1
            else:
                keep.append((s, g))
                kept_outs.append(o)
        clock.lap("incoherence")
        # retrieval: every kept generation against every client's suffixes, each generation analysed once
        terms = [query_terms(g) for _, g in keep]
        retrieved = {}
        with ctx.progress(len(clients), "mr retrieval") as bar:
            for k in clients:
                retrieved[k] = self.indexes[k].search_terms(terms, self.cfg.top_k)
                bar.advance()
        clock.lap("retrieval")
        pairs, owners = [], []
        for i, (_, g) in enumerate(keep):
            for k in clients:
                for doc, _score in retrieved[k][i]:
                    pairs.append((g, self.samples[k][doc].suffix_text))
                    owners.append((i, k, doc))
        self.detector.reset_stats()
        with ctx.progress(len(pairs), "mr detector") as bar:
            detections = self.detector.detect_batch(pairs, progress=bar.advance) if pairs else []
        clock.laps.update({f"detector_{k}": round(v, 3) for k, v in self.detector.timings.items()})
        clock.lap("detector")
        hits = {cat: [set() for _ in keep] for cat in (*CATEGORIES, "any")}
        matched: list[list] = [[] for _ in keep]
        for (i, k, doc), det in zip(owners, detections):
            if det.category in CATEGORIES:
                hits[det.category][i].add(k)
                hits["any"][i].add(k)
                matched[i].append((k, doc, det))
        # dropped generations stay in the denominators: they are sampled prefixes that induced nothing
        prefix_clients = [s.client for s, _ in keep] + [c for c in clients for _ in range(dropped[c])]
        pad = [set() for _ in range(sum(dropped.values()))]
        figures = {cat: mr_figures(prefix_clients, h + pad, run.train_sizes) for cat, h in hits.items()}
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
        section = {
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
            "incoherent_dropped": [dropped[c] for c in clients],
            "generation": self._generation_stats(ctx, outs),
            "pairs_checked": len(pairs),
            "ground_truth": self._ground_truth(keep, hits),
            "examples": self._examples(keep, matched),
            "samples": [{"id": s.id, "client": s.client, "hit_own": s.client in hits["any"][i],
                         "hit_other": bool(hits["any"][i] - {s.client}), "tags": dict(s.tags)}
                        for i, (s, _) in enumerate(keep)],
        }
        if self.cfg.records and ctx.out_dir:
            self._write_records(ctx.out_dir, keep, kept_outs, hits, matched)
        clock.lap("figures")
        section["seconds"] = clock.laps  # where the round's time went, stage by stage (moved to the timings)
        return section

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

    def _ground_truth(self, keep, hits) -> dict:
        """Per canary copy count: how many canary prefixes hit their own client verbatim / in any category, and
        how many generations contain a unique part of the canary's secret (its record number or phone number).

        The last count needs no detector and no retrieval: a verbatim hit can also come from text a canary shares
        with others (its closing is its specialty's, shared with that specialty's public record notes and canaries),
        a leaked secret part cannot.
        """
        out: dict[str, Any] = {}
        for i, (s, gen) in enumerate(keep):
            if "canary" in s.tags:
                row = out.setdefault("canary_by_copies", {}).setdefault(
                    canary_group(s.tags), {"n": 0, "verbatim": 0, "any": 0, "secret_leaked": 0})
                row["n"] += 1
                row["verbatim"] += s.client in hits["verbatim"][i]
                row["any"] += s.client in hits["any"][i]
                row["secret_leaked"] += any(part in gen for part in self.secret_parts.get(s.tags["canary"], []))
            elif s.tags.get("generic"):
                row = out.setdefault("generic", {"n": 0, "any": 0, "inter": 0})
                row["n"] += 1
                row["any"] += bool(hits["any"][i])
                row["inter"] += bool(hits["any"][i] - {s.client})
        return out

    def _examples(self, keep, matched) -> list[dict]:
        """Up to ``examples_per_pair`` detected pairs per category and (prefix client, suffix client), with their
        text: only with ``audit.reveal_text`` (a redacted example says nothing a reader can check)."""
        if not self.run.reveal_text or not self.cfg.examples_per_pair:
            return []
        out, taken = [], {}
        for i, (s, gen) in enumerate(keep):
            for k, doc, det in matched[i]:
                key = (det.category, s.client, k)
                if taken.get(key, 0) < self.cfg.examples_per_pair:
                    taken[key] = taken.get(key, 0) + 1
                    out.append({"category": det.category, "prefix_client": s.client, "suffix_client": k,
                                "prefix_id": s.id, "suffix_id": self.samples[k][doc].id, "prefix": s.prefix_text,
                                "generation": gen, "suffix": self.samples[k][doc].suffix_text,
                                "spans": [[c.src_start, c.src_end, c.susp_start, c.susp_end] for c in det.cases]})
        order = {c: n for n, c in enumerate(CATEGORIES)}
        return sorted(out, key=lambda e: (order[e["category"]], e["prefix_client"], e["suffix_client"]))

    def _write_records(self, out_dir: str, keep, outs, hits, matched) -> None:
        """One line per audited prefix: what it hit, with each match's aligned spans (character offsets
        ``[generation start, end, suffix start, end]``), how its generation stopped (``end_of_turn`` or ``cap``) and
        its length in tokens; with ``audit.reveal_text`` also the exact prompt text the model saw (special tokens
        included), the prefix, the generation and every matched suffix, so a reader can see what the model produced
        and what it matched."""
        reveal, tok, cap = self.run.reveal_text, self.run.tokenizer, self.cfg.max_new_tokens

        def match(k, doc, det) -> dict:
            suffix = self.samples[k][doc]
            row = {"suffix": suffix.id, "client": k, "category": det.category,
                   "spans": [[c.src_start, c.src_end, c.susp_start, c.susp_end] for c in det.cases]}
            return row | ({"suffix_text": suffix.suffix_text} if reveal else {})

        atomic_write_jsonl_gz(os.path.join(out_dir, "mr_records.jsonl.gz"), (
            {"prefix": s.id, "client": s.client, "stop": "cap" if hit_cap(o, cap) else "end_of_turn",
             "generation_tokens": len(o),
             **({"prompt_text": tok.decode(list(s.prompt_ids), skip_special_tokens=False),
                 "prefix_text": s.prefix_text, "generation": gen} if reveal else {}),
             "matches": [match(*m) for m in matched[i]],
             "hit_clients": {cat: sorted(h[i]) for cat, h in hits.items() if h[i]}}
            for i, ((s, gen), o) in enumerate(zip(keep, outs))))

    def truth_rows(self, section: dict) -> list[dict]:
        """A planted canary counts as found when its generation hit its own client's text."""
        return [{"id": s["id"], "tags": s.get("tags") or {}, "split": "train", "score": float(s["hit_own"]),
                 "decision": bool(s["hit_own"])} for s in section.get("samples", [])]

    def verdicts(self, section: dict) -> dict[str, list[dict]]:
        """Beside the other methods, a prefix is flagged when its generation hit any client's text."""
        return {self.name: [{"id": s["id"], "tags": s.get("tags") or {}, "split": "train",
                             "score": float(s["hit_own"] or s["hit_other"]),
                             "decision": bool(s["hit_own"] or s["hit_other"])} for s in section.get("samples", [])]}

