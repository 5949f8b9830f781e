"""What one experiment does, without Flower: data and model set-up, a client's round, the per-round audit hook,
and the centralized baseline. ``clients/`` and ``server/`` are thin Flower wrappers around these functions.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import torch

from fedmem.audit.base import AUDIT_METHODS, AuditRun, AuditSample, RoundContext, build_method_config
from fedmem.config import ExperimentConfig, from_dict
from fedmem.model.load import adapter_state, device, load_adapter_state, load_base, wrap_lora
from fedmem.train import tokenize_examples, train_local


# ---------------------------------------------------------------- configuration files


def load_config(path: str | os.PathLike | None) -> ExperimentConfig:
    """A resolved config written by ``fedmem run`` / ``fedmem resolve`` (YAML), validated; empty: conf/ defaults."""
    import yaml

    if not path:  # `flwr run .` without --run-config: the default experiment
        from fedmem.cli import compose_dict

        return from_dict({**compose_dict([]), "run_dir": "runs/flwr-default"})
    with open(path) as f:
        return from_dict(yaml.safe_load(f))


def write_config(cfg: ExperimentConfig, path: str | os.PathLike) -> None:
    import yaml

    from fedmem.report import atomic_write_text

    atomic_write_text(path, yaml.safe_dump(cfg.to_dict(), sort_keys=False))


# ---------------------------------------------------------------- data and model, cached per process


_CACHE: dict[tuple, object] = {}


def _cached(kind: str, cfg: ExperimentConfig, build, *extra):
    """Per-process memo keyed by the config hash: Ray actors and the server load data and models once."""
    key = (kind, cfg.hash(), cfg.cache_dir, *extra)
    if key not in _CACHE:
        _CACHE[key] = build()
    return _CACHE[key]


def federated_data(cfg: ExperimentConfig):
    """The clients' splits (deterministic from the config; loaded once per process)."""
    from fedmem.data import load_federated

    return _cached("data", cfg, lambda: load_federated(cfg.task, cfg.data, seed=cfg.seed, cache_dir=cfg.cache_dir))


def base_model(cfg: ExperimentConfig):
    """(frozen base model, tokenizer, where it came from); loaded once per process."""
    return _cached("base", cfg, lambda: load_base(cfg.model, federated_data(cfg).public_corpus, cfg.seed,
                                                 cfg.cache_dir, progress=cfg.train.progress))


def fresh_lora_model(cfg: ExperimentConfig):
    """Base + a LoRA adapter seeded by ``cfg.seed`` (identical in every process), on the compute device.

    peft injects adapter layers into the module it wraps, so each LoRA model wraps its own copy of the
    cached base rather than the cached base itself.
    """
    import copy

    base, tokenizer, _ = base_model(cfg)
    torch.manual_seed(cfg.seed)
    model = wrap_lora(copy.deepcopy(base), cfg.model).to(device())
    return model, tokenizer


def train_examples(cfg: ExperimentConfig, client: int | None):
    """Token ids of a client's train split (``None``: the union of all clients, for the centralized baseline)."""

    def build():
        data = federated_data(cfg)
        _, tokenizer, _ = base_model(cfg)
        records = [r for c in data.clients for r in c.train] if client is None else data.clients[client].train
        return tokenize_examples(records, tokenizer, cfg.model.max_seq_len)

    return _cached("examples", cfg, build, client)


_MODELS: dict[str, object] = {}


def client_round(cfg: ExperimentConfig, client: int, global_state: dict, server_round: int, mu: float = 0.0):
    """One client's local training from the global adapter; returns (new adapter, metrics)."""
    key = cfg.hash()
    if key not in _MODELS:  # one LoRA model per process (Ray actor), re-used across rounds and clients
        _MODELS.clear()
        _MODELS[key] = fresh_lora_model(cfg)
    model, tokenizer = _MODELS[key]
    load_adapter_state(model, global_state)
    examples = train_examples(cfg, client)
    metrics = train_local(
        model,
        examples,
        cfg.train,
        seed=cfg.seed * 1_000_003 + server_round * 1_009 + client,
        pad_id=tokenizer.pad_token_id,
        proximal_mu=mu,
        desc=f"round {server_round} client {client}",
    )
    return adapter_state(model), metrics


# ---------------------------------------------------------------- audit samples


def build_audit_run(cfg: ExperimentConfig, data, tokenizer) -> AuditRun:
    """The samples audited every round: fixed per run, chosen by seed.

    Canary records are always included, so the report can score every detector against the truth; the rest is
    a seeded uniform sample. Duplicated memorization texts (a canary's copies) are audited once.
    """
    from fedmem.data import format_prompt

    a = cfg.audit
    rng = random.Random(cfg.seed)

    def prepare(rec, client: int, split: str, idx: int) -> AuditSample | None:
        ids = tokenizer(rec.mem_text, add_special_tokens=False)["input_ids"]
        if len(ids) < a.prefix_len + max(1, a.suffix_len // 2):
            return None  # too short to hold a prefix and a meaningful suffix
        prefix, suffix = ids[: a.prefix_len], ids[a.prefix_len : a.prefix_len + a.suffix_len]
        prefix_text = tokenizer.decode(prefix)
        user = rec.user.replace(rec.mem_text, prefix_text, 1)
        return AuditSample(
            id=f"c{client}/{split}/{idx}",
            client=client,
            split=split,
            prompt_ids=tuple(tokenizer(format_prompt(tokenizer, user), add_special_tokens=False)["input_ids"]),
            prefix_ids=tuple(prefix),
            suffix_ids=tuple(suffix),
            prefix_text=prefix_text,
            suffix_text=tokenizer.decode(suffix),
            reference=rec.assistant,
            label=rec.label,
            tags={**dict(rec.tags), "record_id": rec.id},
            full_prompt_ids=tuple(tokenizer(format_prompt(tokenizer, rec.user), add_special_tokens=False)["input_ids"]),
        )

    def pick(records, n: int, client: int, split: str) -> list[AuditSample]:
        # canaries first (always audited, so the truth can be scored), then a uniform sample of the rest, in
        # which boilerplate samples occur at their natural rate (MR samples prefixes uniformly, SPEC §3)
        seen, canaries, rest = set(), [], []
        for i, r in enumerate(records):
            if r.mem_text in seen:
                continue
            seen.add(r.mem_text)
            (canaries if split == "train" and "canary" in r.tags else rest).append(i)
        rng.shuffle(rest)
        out = []
        for i in canaries + rest:
            if len(out) >= max(n, len(canaries)):
                break
            s = prepare(records[i], client, split, i)
            if s is not None:
                out.append(s)
        return out

    train = {c: pick(cs.train, a.samples_per_client, c, "train") for c, cs in enumerate(data.clients)}
    test = {c: pick(cs.test, a.test_per_client, c, "test") for c, cs in enumerate(data.clients)}
    return AuditRun(
        train=train,
        test=test,
        train_sizes={c: len(cs.train) for c, cs in enumerate(data.clients)},
        tokenizer=tokenizer,
        decoding=a.decoding,
        prefix_len=a.prefix_len,
        suffix_len=a.suffix_len,
        seed=cfg.seed,
        task=cfg.task.name,
        ground_truth=data.ground_truth,
        reveal_text=a.reveal_text,
        task_config=cfg.task,
        public_texts=tuple(data.public_corpus),
    )


# ---------------------------------------------------------------- the per-round hook


class Auditor:
    """Built once per run on the server side; called at round 0 and after every round (or epoch, for CL)."""

    def __init__(self, cfg: ExperimentConfig, label: str = "fl"):
        import fedmem.audit  # noqa: F401  (registers the built-in methods)

        self.cfg, self.label = cfg, label
        self.run_dir = Path(cfg.run_dir)
        self.data = federated_data(cfg)
        self.model, self.tokenizer = fresh_lora_model(cfg)
        t = time.perf_counter()
        self.run = build_audit_run(cfg, self.data, self.tokenizer)
        self.methods = {
            name: AUDIT_METHODS[name](build_method_config(name, cfg.audit.sections.get(name)), self.run)
            for name in cfg.audit.methods
        }
        self.setup_seconds = time.perf_counter() - t
        self.history: list[dict] = []
        self._t0 = time.perf_counter()
        self._last_end: float | None = None  # end of the previous audit: the next call's start - this = round time

    def initial_adapter(self) -> dict:
        return adapter_state(self.model)

    def evaluate(self, server_round: int, state: dict, train_log: dict | None = None) -> dict:
        """Load the global adapter, save it, run every audit method, write ``round_<r>/``; returns headline metrics."""
        from fedmem.report import save_adapter, write_round_report

        round_seconds = None if self._last_end is None else time.perf_counter() - self._last_end
        load_adapter_state(self.model, state)
        out = self.run_dir / f"round_{server_round}"
        out.mkdir(parents=True, exist_ok=True)
        save_adapter(self.model, out / "adapter")
        ctx = RoundContext(
            run=self.run, round=server_round, model=self.model, label=self.label,
            out_dir=str(out), batch_size=self.cfg.audit.batch_size,
        )
        sections, timings = {}, {}
        for name, method in self.methods.items():
            t = time.perf_counter()
            sections[name] = method.audit(ctx)
            timings[name] = round(time.perf_counter() - t, 3)
        if (self.run.ground_truth or {}).get("canaries"):
            from fedmem.audit.truth import score_against_truth

            sections["ground_truth_scores"] = score_against_truth(sections)
        if round_seconds is not None:
            timings["round_training"] = round(round_seconds, 3)  # training + communication, audits excluded
        report = write_round_report(
            out, self.cfg, server_round, self.label, sections, timings, train_log or {}, self.methods,
            elapsed=time.perf_counter() - self._t0,
        )
        self.history.append(report)
        self._last_end = time.perf_counter()
        return headline(report)

    def finish(self) -> None:
        from fedmem.report import write_run_report

        write_run_report(self.run_dir, self.cfg, self.history, self.methods)
        for method in self.methods.values():
            if hasattr(method, "close"):  # e.g. Elasticsearch indices this run created
                method.close()


def headline(report: dict) -> dict[str, float]:
    """A few scalar figures per round (logged by Flower, plotted as curves)."""
    out = {}
    for name, sec in report.get("audit", {}).items():
        for k, v in (sec.get("headline") or {}).items():
            if isinstance(v, (int, float)) and v is not None:
                out[f"{name}/{k}"] = float(v)
    return out


# ---------------------------------------------------------------- centralized baseline


def run_centralized(cfg: ExperimentConfig) -> Path:
    """Train the same model on the union of the clients' train splits, one epoch per 'round', same hook."""
    auditor = Auditor(cfg, label="cl")
    model, tokenizer = auditor.model, auditor.tokenizer
    examples = train_examples(cfg, None)
    auditor.evaluate(0, adapter_state(model))
    for epoch in range(1, cfg.strategy.num_rounds + 1):
        metrics = train_local(
            model, examples, cfg.train, seed=cfg.seed * 1_000_003 + epoch * 1_009, pad_id=tokenizer.pad_token_id,
            epochs=cfg.train.local_epochs, desc=f"centralized epoch {epoch}",
        )
        auditor.evaluate(epoch, adapter_state(model), {"centralized": metrics})
    auditor.finish()
    return auditor.run_dir

