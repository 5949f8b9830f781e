"""The per-round audit of the global model: load its adapter, run every enabled method, write ``round_<r>/``.

Built once per run (the audited samples, indexes and helper models are fixed per run) and called at round 0 and
after every round (every epoch for the centralized baseline). The caller passes the data and the LoRA model in;
this layer never trains and never reads back what it wrote.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


from safetensors.torch import load_file

from fedmem.audit import AUDIT_METHODS, AuditedModel
from fedmem.audit.agreement import agreement
from fedmem.audit.truth import method_verdicts, score_against_truth
from fedmem.common.progress import progress_bar
from fedmem.config.experiment import ExperimentConfig
from fedmem.engine.model.gguf import gguf_identity
from fedmem.engine.model.load import adapter_state, load_adapter_state, save_adapter
from fedmem.experiment.loading import AuditPlan, audit_plan, fresh_lora_model
from fedmem.federation.privacy import round_privacy, sampled_clients
from fedmem.reports.console import round_line
from fedmem.reports.pages import (
    RoundResult,
    headline,
    train_rows,
    write_round_report,
    write_run_report,
)


def averaged_replies(participation: dict | None) -> int | None:
    """How many clients' updates a round averaged (its trained clients); None where the round does not say."""
    return len(participation["trained"]) if participation and "trained" in participation else None


class Auditor:
    """``source`` (written into every report) says what is audited; ``save_adapters`` keeps each audited adapter
    in ``round_<r>/adapter`` (a training run does; an audit of saved or external models has them already).
    ``plan``: the run's audit pool and method configs (``fedmem.experiment.loading.audit_plan``), built and checked
    by the caller before anything was written."""

    def __init__(self, cfg: ExperimentConfig, model, tokenizer, plan: AuditPlan, label: str = "fl",
                 source: dict | None = None, save_adapters: bool = True):
        self.cfg, self.label = cfg, label
        self.source, self.save_adapters = source or {"kind": "training"}, save_adapters
        self.run_dir = Path(cfg.run_dir)
        # where the audited run keeps each round's global adapter: this run's, or the re-audited run's
        self.adapters_dir = str(self.run_dir) if save_adapters else self.source.get("run")
        self.model, self.tokenizer = model, tokenizer
        t = time.perf_counter()
        self.pool = plan.pool
        self.methods = {name: AUDIT_METHODS[name](c, self.pool) for name, c in plan.configs.items()}
        self.setup_seconds = time.perf_counter() - t
        self.history: list[dict] = []
        # round -> who took part in it, every round of the run so far (a re-audit of some rounds knows them all):
        # DP's budget accounts each round with the replies it averaged
        self.participation: dict[int, dict] = {}
        self._t0 = time.perf_counter()
        self._last_end: float | None = None  # end of the previous audit: the next call's start - this = round time

    def restore(self, reports: list[dict]) -> None:
        """Continue a run: the round reports already written (in round order) become this auditor's history, so the
        run report covers every round."""
        self.history = list(reports)
        self.know_rounds(reports)

    def know_rounds(self, reports: list[dict]) -> None:
        """Who took part in each round of ``reports`` (a run's round reports), for the privacy budget."""
        self.participation.update({r["round"]: r.get("participation") or {} for r in reports})

    def initial_adapter(self) -> dict:
        return adapter_state(self.model)

    def evaluate(self, server_round: int, state: dict | None, train_log: dict | None = None,
                 participation: dict | None = None, clipping_norm: float | None = None) -> dict[str, float]:
        """Load the global adapter (``None``: audit the model as it is), run every audit method, write
        ``round_<r>/``; returns the headline figures. ``participation``: which clients were sampled, trained
        and failed in the round; ``clipping_norm``: the norm DP clipped the round's updates to (both written into
        the report)."""
        round_seconds = None if self._last_end is None else time.perf_counter() - self._last_end
        if state is not None:
            load_adapter_state(self.model, state)
        out = self.run_dir / f"round_{server_round}"
        out.mkdir(parents=True, exist_ok=True)
        if self.save_adapters:
            save_adapter(self.model, out / "adapter")
        sections, timings = self._audit(server_round, out)
        if round_seconds is not None:
            timings["round_training"] = round(round_seconds, 3)  # training + communication, audits excluded
        truth = score_against_truth(self.methods, sections) if (self.pool.ground_truth or {}).get("canaries") else {}
        verdicts = method_verdicts(self.methods, sections)
        common = {i for ids in self.pool.common_draw.values() for i in ids}
        result = RoundResult(
            round=server_round, label=self.label, sections=sections, timings=timings,
            elapsed=time.perf_counter() - self._t0, source=self.source, train_log=train_log or {},
            participation=participation or {}, truth=truth,
            defense=self._defense(server_round, clipping_norm, train_log, participation),
            agreement=agreement(verdicts, common, self.pool.seed) if len(verdicts) >= 2 and common else {},
        )
        report = write_round_report(out, self.cfg, result, self.methods, self.pool)
        print(round_line(report, self.cfg.strategy.num_rounds), file=sys.stderr, flush=True)
        self.history.append(report)
        self._last_end = time.perf_counter()
        return headline(report)

    def _defense(self, server_round: int, clipping_norm: float | None, train_log: dict | None,
                 participation: dict | None) -> dict:
        """What protected the data up to this round: DP's budget spent (epsilon after ``server_round`` rounds, each
        accounted with the replies it really averaged) and clipping, and what deduplication removed (the data's
        record of it)."""
        cfg, norms = self.cfg, [m["update_norm"] for m in train_rows(train_log or {}) if "update_norm" in m]
        self.participation[server_round] = participation or {}
        averaged = [averaged_replies(self.participation.get(r)) for r in range(1, server_round + 1)]
        averaged = [m if m is not None else sampled_clients(cfg.strategy, cfg.num_clients) for m in averaged]
        dp = round_privacy(cfg.defense, cfg.strategy, cfg.num_clients, averaged, clipping_norm, norms)
        return {"dp": dp, "dedup": (self.pool.ground_truth or {}).get("dedup")}

    def _audit(self, server_round: int, out: Path) -> tuple[dict, dict]:
        """(each method's report section, the seconds each took and its stages') for the model as it is now."""
        audit = self.cfg.audit
        audited = AuditedModel(
            pool=self.pool, round=server_round, model=self.model, label=self.label,
            out_dir=str(out), batch_size=audit.batch_size,
            generation_batch_size=None if audit.generation_batch_size == "auto" else audit.generation_batch_size,
            generation_backend=audit.generation_backend, merge_adapter=audit.merge_adapter,
            show_progress=self.cfg.train.progress, adapters_dir=self.adapters_dir,
        )
        sections, timings = {}, {}
        with progress_bar(len(self.methods), f"audit round {server_round}", self.cfg.train.progress) as bar:
            for name, method in self.methods.items():
                bar.describe(f"audit round {server_round}: {name}")
                t = time.perf_counter()
                sections[name] = method.audit(audited)
                timings[name] = round(time.perf_counter() - t, 3)
                stages = sections[name].pop("seconds", None)  # timings live beside the figures, not among them
                if stages:
                    timings[f"{name}_stages"] = stages
                bar.advance()
        return sections, timings

    def finish(self) -> None:
        write_run_report(self.run_dir, self.cfg, self.history, self.methods)
        for method in self.methods.values():
            method.close()



def make_auditor(cfg: ExperimentConfig, label: str = "fl", source: dict | None = None,
                 save_adapters: bool = True) -> Auditor:
    """The run's auditor over the global model (its own LoRA model, seeded like every client's). ``source`` (what is
    audited; a training run unless told) also gets a GGUF base model's file and sha256, so that every report names
    the exact weights that were fine-tuned."""
    source = {**(source or {"kind": "training"}), **gguf_identity(cfg.model)}
    return Auditor(cfg, *fresh_lora_model(cfg), audit_plan(cfg), label=label, source=source,
                   save_adapters=save_adapters)


def saved_adapter(run_dir, server_round: int) -> dict:
    """The global adapter written after ``server_round`` (``round_<r>/adapter``)."""
    return load_file(str(Path(run_dir) / f"round_{server_round}" / "adapter" / "adapter_model.safetensors"))


def training_auditor(cfg: ExperimentConfig, label: str, start_round: int = 0) -> tuple[Auditor, dict]:
    """(the auditor of a run fedmem trains, the global adapter to train from): a new run's initial adapter, or,
    continuing after ``start_round``, that round's saved adapter, with the reports of rounds 0..``start_round`` as
    the history."""
    auditor = make_auditor(cfg, label=label)
    if not start_round:
        return auditor, auditor.initial_adapter()
    auditor.restore([json.loads((Path(cfg.run_dir) / f"round_{r}" / "report.json").read_text())
                     for r in range(start_round + 1)])
    return auditor, saved_adapter(cfg.run_dir, start_round)
