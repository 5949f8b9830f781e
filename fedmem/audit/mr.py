"""Cross-client memorization ratio MR(j→k) as a per-round audit method (SPEC §3).

Per round: one generation pass over every client's sampled prefixes (shared through ``RoundContext``), the
incoherence filter, BM25 top-k over every client's suffix index (built once per run: the samples are fixed),
one batched detector call over all (generation, retrieved suffix) pairs, then the MR figures per category.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from fedmem.audit.base import AuditMethod, AuditRun, RoundContext, register
from fedmem.audit.detector import CATEGORIES, DetectorConfig, PlagiarismDetector, is_incoherent
from fedmem.audit.mr_stats import mr_figures
from fedmem.audit.suffix_index import IndexConfig, elasticsearch_client, query_terms, suffix_index
from fedmem.audit.truth import canary_group, canary_group_order
from fedmem.config import build_section, check_fields, option, positive, section
from fedmem.io import atomic_write_jsonl_gz, pyplot, save_figure


@dataclass
class MRConfig:
    n: int = option(600, "sampled prefixes (and suffixes) per client (the paper: 4000)")
    top_k: int = option(10, "retrieved suffixes per generation and client (n')")
    index: IndexConfig = section(IndexConfig, "suffix index (IndexConfig fields)")
    detector: DetectorConfig = section(DetectorConfig, "PAN2014 detector (DetectorConfig fields)")
    drop_incoherent: bool = option(True, "drop generations repeating a 3-gram >= 10x")
    records: bool = option(True, "write per-prefix records to round_<r>/mr_records.jsonl.gz")

    def __post_init__(self):
        if isinstance(self.index, dict):
            self.index = build_section(IndexConfig, self.index, "audit.mr.index")
        if isinstance(self.detector, dict):
            self.detector = build_section(DetectorConfig, self.detector, "audit.mr.detector")
        check_fields(self, "audit.mr")
        positive(self, "audit.mr", "n", "top_k")


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
        outs = ctx.generate([s.prompt_ids for s in prefixes], run.suffix_len)
        gens = [ctx.decode(o[0]) for o in outs]
        clock.lap("generation")
        dropped = {c: 0 for c in clients}
        keep = []
        for s, g in zip(prefixes, gens):
            if self.cfg.drop_incoherent and is_incoherent(g):
                dropped[s.client] += 1
            else:
                keep.append((s, g))
        clock.lap("incoherence")
        # retrieval: every kept generation against every client's suffixes, each generation analysed once
        terms = [query_terms(g) for _, g in keep]
        retrieved = {k: self.indexes[k].search_terms(terms, self.cfg.top_k) for k in clients}
        clock.lap("retrieval")
        pairs, owners = [], []
        for i, (_, g) in enumerate(keep):
            for k in clients:
                for doc, _score in retrieved[k][i]:
                    pairs.append((g, self.samples[k][doc].suffix_text))
                    owners.append((i, k, doc))
        self.detector.reset_stats()
        detections = self.detector.detect_batch(pairs) if pairs else []
        clock.laps.update({f"detector_{k}": round(v, 3) for k, v in self.detector.timings.items()})
        clock.lap("detector")
        hits = {cat: [set() for _ in keep] for cat in (*CATEGORIES, "any")}
        matched: list[list] = [[] for _ in keep]
        for (i, k, doc), det in zip(owners, detections):
            if det.category in CATEGORIES:
                hits[det.category][i].add(k)
                hits["any"][i].add(k)
                matched[i].append([self.samples[k][doc].id, det.category])
        # dropped generations stay in the denominators: they are sampled prefixes that induced nothing
        prefix_clients = [s.client for s, _ in keep] + [c for c in clients for _ in range(dropped[c])]
        pad = [set() for _ in range(sum(dropped.values()))]
        figures = {cat: mr_figures(prefix_clients, h + pad, run.train_sizes) for cat, h in hits.items()}
        any_ = figures["any"]
        section = {
            # MR_Total is MR_TotalFL for a federated run and MR_TotalCL for the centralized baseline
            "setting": ctx.label,
            "reference": self.reference,
            "headline": {"intra": any_["intra"], "inter": any_["inter"], "total": any_["total"],
                         **{f"{c}_total": figures[c]["total"] for c in CATEGORIES}},
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
            "incoherent_dropped": dropped,
            "pairs_checked": len(pairs),
            "ground_truth": self._ground_truth(keep, hits),
            "samples": [{"id": s.id, "client": s.client, "hit_own": s.client in hits["any"][i],
                         "hit_other": bool(hits["any"][i] - {s.client}), "tags": dict(s.tags)}
                        for i, (s, _) in enumerate(keep)],
        }
        if any_["intra_minus_inter"]:  # a sweep's tables average it over seeds; its standard error is in the section
            section["headline"]["intra_minus_inter"] = any_["intra_minus_inter"]["diff"]
        if self.cfg.records and ctx.out_dir:
            self._write_records(ctx.out_dir, keep, hits, matched)
        clock.lap("figures")
        section["seconds"] = clock.laps  # where the round's time went, stage by stage (moved to the timings)
        return section

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

    def _write_records(self, out_dir: str, keep, hits, matched) -> None:
        atomic_write_jsonl_gz(os.path.join(out_dir, "mr_records.jsonl.gz"), (
            {"prefix": s.id, "client": s.client, "matches": matched[i],
             "hit_clients": {cat: sorted(h[i]) for cat, h in hits.items() if h[i]}}
            for i, (s, _) in enumerate(keep)))

    def truth_rows(self, section: dict) -> list[dict]:
        return [{"tags": s.get("tags") or {}, "split": "train", "score": float(s["hit_own"]),
                 "decision": bool(s["hit_own"])} for s in section.get("samples", [])]

    def render(self, section: dict, out_dir: str) -> list[tuple[str, str]]:
        plt = pyplot()
        out = []
        for cat in ("any", *CATEGORIES):
            m = section["matrix"][cat]
            fig, ax = plt.subplots(figsize=(3.6, 3.2))
            im = ax.imshow(m, cmap="Reds", vmin=0, vmax=max(0.01, max(max(r) for r in m)))
            for j, row in enumerate(m):
                for k, v in enumerate(row):
                    ax.text(k, j, f"{100 * v:.1f}", ha="center", va="center", fontsize=8)
            ax.set_xlabel("k (suffix client)")
            ax.set_ylabel("j (prefix client)")
            ax.set_title(f"MR(j→k) %, {cat}", fontsize=9)
            fig.colorbar(im, ax=ax, fraction=0.046)
            out.append((f"MR {cat}", save_figure(fig, os.path.join(out_dir, f"mr_{cat}.png"), dpi=90)))
        return out

    @staticmethod
    def _pct(section: dict, cat: str, figure: str) -> str:
        value = section[figure][cat]
        if value is None:
            return "n/a"
        se = ((section.get("uncertainty") or {}).get(cat, {}).get(figure) or {}).get("se")
        return f"{100 * value:.2f}" + (f" ± {100 * se:.2f}" if se is not None else "")

    def markdown(self, section: dict) -> str:
        m, clients = section["matrix"]["any"], section["clients"]
        total = "MR_TotalCL" if section.get("setting") == "cl" else "MR_TotalFL"
        lines = ["MR(j→k) in %, any category (rows: prefix client j, columns: suffix client k)", "",
                 "| j \\ k | " + " | ".join(map(str, clients)) + " |", "|---" * (len(clients) + 1) + "|"]
        se = ((section.get("uncertainty") or {}).get("any", {}).get("matrix_se")
              or [[None] * len(clients)] * len(clients))
        for j, row, row_se in zip(clients, m, se):
            lines.append(f"| {j} | " + " | ".join(f"{100 * v:.2f}" + (f" ± {100 * e:.2f}" if e is not None else "")
                                                  for v, e in zip(row, row_se)) + " |")
        lines += ["", f"| category | MR_Intra % | MR_Inter % | {total} % |", "|---|---|---|---|",
                  *[f"| {cat} | " + " | ".join(self._pct(section, cat, fig) for fig in ("intra", "inter", "total")) + " |"
                    for cat in ("any", *CATEGORIES)],
                  "", "(± one standard error over the sampled prefixes; report.json holds 95% intervals, Wilson's "
                  "for the matrix cells and MR_Total)"]
        d = (section.get("intra_minus_inter") or {}).get("any")
        if d:
            lines += ["", f"MR_Intra − MR_Inter (any): {100 * d['diff']:.2f} ± {100 * d['se']:.2f} points (standard "
                      f"error over prefixes; 95% interval {100 * d['ci95'][0]:.2f} to {100 * d['ci95'][1]:.2f})"]
        gt = section.get("ground_truth", {}).get("canary_by_copies")
        if gt:
            lines += ["", "Canaries hitting their own client (verbatim / any) and generations leaking a secret "
                      "record or phone number, by copies: " + ", ".join(
                          f"{c}×: {v['verbatim']}/{v['n']} / {v['any']}/{v['n']} / {v.get('secret_leaked', 0)}/{v['n']}"
                          for c, v in sorted(gt.items(), key=lambda kv: canary_group_order(kv[0])))]
        ref = section.get("reference") or {}
        if ref:
            lines += ["", "Components: " + "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in ref.items())]
        dropped = section["incoherent_dropped"]
        per_client = ", ".join(f"client {c}: {n}" for c, n in dropped.items())
        lines.append(f"\nIncoherent generations dropped: {sum(dropped.values())} ({per_client}); "
                     f"pairs checked by the detector: {section['pairs_checked']}")
        return "\n".join(lines)
