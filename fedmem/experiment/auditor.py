"""The per-round audit of the global model: load its adapter, run every enabled method, write ``round_<r>/``.

Built once per run (the audited samples, indexes and helper models are fixed per run) and called at round 0 and
after every round (every epoch for the centralized baseline). The caller passes the data and the LoRA model in;
this layer never trains and never reads back what it wrote.
"""

from __future__ import annotations

import contextlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from fedmem.audit import AUDIT_METHODS, AuditedModel
from fedmem.audit.agreement import agreement
from fedmem.audit.truth import method_verdicts, score_against_truth
from fedmem.common.progress import progress_bar
from fedmem.config.experiment import ExperimentConfig, method_configs
from fedmem.engine.health import adapter_norm, degenerate
from fedmem.engine.model.gguf import gguf_identity
from fedmem.engine.model.load import adapter_state, load_adapter_state, save_adapter
from fedmem.experiment.archive import RunArchive, saved_adapter
from fedmem.experiment.loading import AuditPlan, audit_plan, fresh_lora_model
from fedmem.federation.privacy import round_privacy, sampled_clients
from fedmem.federation.rounds import RoundFailedError
from fedmem.reports.console import alert_lines, round_line, say
from fedmem.reports.pages import (
    RoundResult,
    headline,
    train_rows,
    write_round_report,
    write_run_report,
)
from fedmem.tracking import NO_TRACKER, run_tracker


def averaged_replies(participation: dict | None) -> int | None:
    """How many clients' updates a round averaged (its trained clients); None where the round does not say."""
    return len(participation["trained"]) if participation and "trained" in participation else None


class Auditor:
    """``source`` (written into every report) says what is audited; ``save_adapters`` keeps each audited adapter
    in ``round_<r>/adapter`` (a training run does; an audit of saved or external models has them already).
    ``plan``: the run's audit pool and method configs (``fedmem.experiment.loading.audit_plan``), built and checked
    by the caller before anything was written. ``archive``: the run's other rounds and clients' updates, for the
    methods that look past the audited model (None: an audit of this model alone)."""

    def __init__(self, cfg: ExperimentConfig, model, tokenizer, plan: AuditPlan, label: str = "fl",
                 source: dict | None = None, save_adapters: bool = True, archive: RunArchive | None = None):
        self.cfg, self.label, self.archive = cfg, label, archive
        self.source, self.save_adapters = source or {"kind": "training"}, save_adapters
        self.run_dir = Path(cfg.run_dir)
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
        self.tracker = NO_TRACKER  # a training run's experiment tracker (``training_auditor``)

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
        defense = self._defense(server_round, clipping_norm, train_log, participation)
        health = self._health(server_round, defense)
        if health["degenerate"]:  # a finding of the run, not a crash in the first audit that samples from it
            sections = {name: method.on_degenerate(health["reason"]) for name, method in self.methods.items()}
            timings = {"audit": 0.0}
        else:
            sections, timings = self._audit(server_round, out, (defense.get("dp") or {}).get("epsilon"))
        if round_seconds is not None:
            timings["round_training"] = round(round_seconds, 3)  # training + communication, audits excluded
        truth = score_against_truth(self.methods, sections) if (self.pool.ground_truth or {}).get("canaries") else {}
        verdicts = method_verdicts(self.methods, sections)
        common = {i for ids in self.pool.common_draw.values() for i in ids}
        result = RoundResult(
            round=server_round, label=self.label, sections=sections, timings=timings,
            elapsed=time.perf_counter() - self._t0, source=self.source, train_log=train_log or {},
            participation=participation or {}, truth=truth,
            defense=defense, health=health,
            agreement=agreement(verdicts, common, self.pool.seed) if len(verdicts) >= 2 and common else {},
        )
        report = write_round_report(out, self.cfg, result, self.methods, self.pool)
        say(round_line(report, self.cfg.strategy.num_rounds))
        for line in alert_lines(report):
            say(line)
        self.tracker.round(report, out)
        self.history.append(report)
        if self.archive is not None:
            self.archive.audited(server_round)
        self._last_end = time.perf_counter()
        return headline(report)

    def _health(self, server_round: int, defense: dict) -> dict:
        """Whether the model can be audited (``fedmem.engine.health``), with its adapter's norm beside the norm the
        DP noise puts on the round's average (z C / m per weight, over the adapter's d weights): a model the noise
        destroyed shows the one far above the other. ``audit.stop_on_degenerate`` ends the run there."""
        state = adapter_state(self.model) if hasattr(self.model, "peft_config") else {}  # an external model may have none
        prompts = [s.prompt_ids for c in self.pool.clients for s in self.pool.train[c][:2]][:4]
        reason = degenerate(self.model, state, prompts)
        out = {"degenerate": reason is not None, "reason": reason, "adapter_norm": adapter_norm(state)}
        dp = defense.get("dp")
        if dp and server_round > 0:
            size = sum(t.numel() for t in state.values())
            out["noise_norm"] = dp["noise_multiplier"] * dp["clipping_norm"] / dp["sampled"] * size ** 0.5
        if reason and self.cfg.audit.stop_on_degenerate:
            raise RoundFailedError(f"round {server_round}: the global model is degenerate ({reason}); "
                                   "audit.stop_on_degenerate=true ends the run here")
        return out

    def _defense(self, server_round: int, clipping_norm: float | None, train_log: dict | None,
                 participation: dict | None) -> dict:
        """What protected the data up to this round: DP's budget spent (epsilon after ``server_round`` rounds, each
        accounted with the replies it really averaged) and clipping, and what deduplication removed (the data's
        record of it)."""
        cfg, norms = self.cfg, [m["update_norm"] for m in train_rows(train_log or {}) if "update_norm" in m]
        self.participation[server_round] = participation or {}
        averaged = [averaged_replies(self.participation.get(r)) for r in range(1, server_round + 1)]
        averaged = [m if m is not None else sampled_clients(cfg.strategy, cfg.num_clients) for m in averaged]
        canaries = method_configs(cfg).get("canary_clients")
        releases = 2 if canaries is not None and canaries.keep_release and cfg.data.audit_canary_clients else 1
        dp = round_privacy(cfg.defense, cfg.strategy, cfg.num_clients, averaged, clipping_norm, norms, releases)
        return {"dp": dp, "dedup": (self.pool.ground_truth or {}).get("dedup")}

    def _audit(self, server_round: int, out: Path, budget: float | None = None) -> tuple[dict, dict]:
        """(each method's report section, the seconds each took and its stages') for the model as it is now;
        ``budget``: the accountant's ε for it (DP), which the empirical privacy figures are read beside."""
        audit = self.cfg.audit
        audited = AuditedModel(
            pool=self.pool, round=server_round, model=self.model, label=self.label,
            out_dir=str(out), batch_size=audit.batch_size,
            generation_batch_size=None if audit.generation_batch_size == "auto" else audit.generation_batch_size,
            generation_backend=audit.generation_backend, merge_adapter=audit.merge_adapter,
            show_progress=self.cfg.train.progress, archive=self.archive, budget=budget,
        )
        apart = [n for n, m in self.methods.items() if m.runs_apart] if (
            lanes_pay(audit.concurrent, self.model) and audit.merge_adapter and len(self.methods) > 1) else []
        rest = [n for n in self.methods if n not in apart]
        done, start = {}, time.perf_counter()
        with progress_bar(len(self.methods), f"audit round {server_round}", self.cfg.train.progress) as bar:
            if apart:
                audited.computing_model  # built once, before the lanes share it  # noqa: B018
            # one second lane, its methods one after another: at most two generations hold their caches at once
            lanes = ThreadPoolExecutor(max_workers=1)
            try:
                with cores_shared_by(2 if rest and apart else 1):
                    beside = {name: lanes.submit(self._audit_one, name, audited, bar) for name in apart}
                    for name in rest:
                        done[name] = self._audit_one(name, audited, bar)
                    done |= {name: future.result() for name, future in beside.items()}
            except BaseException:  # an error or Ctrl-C ends the round: the method beside is not waited for
                lanes.shutdown(wait=False, cancel_futures=True)
                raise
            lanes.shutdown()
        sections, timings = {}, {"audit": round(time.perf_counter() - start, 3)}
        for name in self.methods:  # in the methods' order, however they ran
            sections[name], seconds, stages = done[name]
            timings[name] = seconds
            if stages:  # timings live beside the figures, not among them
                timings[f"{name}_stages"] = stages
        return sections, timings

    def _audit_one(self, name: str, audited: AuditedModel, bar) -> tuple[dict, float, dict | None]:
        """(the method's section, its seconds, its stages' seconds)."""
        bar.describe(f"audit round {audited.round}: {name}")
        t = time.perf_counter()
        section = self.methods[name].audit(audited)
        seconds = round(time.perf_counter() - t, 3)
        bar.advance()
        return section, seconds, section.pop("seconds", None)

    def finish(self) -> None:
        write_run_report(self.run_dir, self.cfg, self.history, self.methods)
        self.tracker.finish()
        for method in self.methods.values():
            method.close()


# A lane pays where a model's decoding steps are bound by Python's dispatch rather than by their matrix products:
# there each lane keeps a core busy that the other would leave waiting (the tiny preset, about a million parameters).
# A model whose products already use every thread (SmolLM2-135M) only splits them: each lane gets one thread, and
# the longer lane (MR, then Prior-Aware) runs on one core long after the other has finished (docs/history.md).
LANES_BELOW_PARAMS = 50_000_000


def lanes_pay(concurrent: bool | str, model) -> bool:
    """Whether the audit runs its second lane (``audit.concurrent``; auto: for a model under ``LANES_BELOW_PARAMS``)."""
    if concurrent != "auto":
        return bool(concurrent)
    return sum(p.numel() for p in model.parameters()) < LANES_BELOW_PARAMS


@contextlib.contextmanager
def cores_shared_by(lanes: int):
    """torch's threads divided between ``lanes`` audits running at once (restored after), so that together they use
    the cores once over instead of contending for them."""
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, threads // max(1, lanes)))
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def make_auditor(cfg: ExperimentConfig, label: str = "fl", source: dict | None = None,
                 save_adapters: bool = True, archive: RunArchive | None = None) -> Auditor:
    """The run's auditor over the global model (its own LoRA model, seeded like every client's). ``source`` (what is
    audited; a training run unless told) also gets a GGUF base model's file and sha256, so that every report names
    the exact weights that were fine-tuned."""
    source = {**(source or {"kind": "training"}), **gguf_identity(cfg.model)}
    return Auditor(cfg, *fresh_lora_model(cfg), audit_plan(cfg), label=label, source=source,
                   save_adapters=save_adapters, archive=archive)


def training_auditor(cfg: ExperimentConfig, label: str, start_round: int = 0) -> tuple[Auditor, dict]:
    """(the auditor of a run fedmem trains, the global adapter to train from): a new run's initial adapter, or,
    continuing after ``start_round``, that round's saved adapter, with the reports of rounds 0..``start_round`` as
    the history."""
    auditor = make_auditor(cfg, label=label, archive=RunArchive.of_training(cfg))
    auditor.tracker = run_tracker(cfg)
    if not start_round:
        return auditor, auditor.initial_adapter()
    auditor.restore([json.loads((Path(cfg.run_dir) / f"round_{r}" / "report.json").read_text())
                     for r in range(start_round + 1)])
    return auditor, saved_adapter(cfg.run_dir, start_round)
