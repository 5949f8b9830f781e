"""The settings every audit method shares (``audit.*``); each method's own settings are its ``Config``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fedmem.common.fields import (
    build_section,
    check_fields,
    option,
    option_factory,
    positive,
    section,
)
from fedmem.engine.config import Decoding


@dataclass
class AuditConfig:
    """What is audited after every round (and at round 0), and the settings the methods share.

    ``samples_per_client`` and ``test_per_client`` size the pool of prepared samples (fixed per run); each
    method audits a part of that pool, and asking for more than the pool holds is an error, never a cap.
    """

    methods: list[str] = option_factory(["utility", "mr", "pearl", "pa", "mia", "trajectory", "one_run"],
                                        "enabled audit methods, by registry name")
    prefix_len: int = option(30, "prefix tokens of the memorization text; the suffix is all the rest of it")
    samples_per_client: int | Literal["all"] = option(
        600, "train samples per client prepared for auditing, fixed per run; all = every usable one")
    test_per_client: int | Literal["all"] = option(
        600, "test samples per client prepared (held-out prefixes of MR's control, non-members, utility); all = every "
             "usable one")
    size: Literal["fixed", "auto"] = option(
        "fixed", "fixed: every audit size as configured, and a setting the data cannot fill refused (all of them in "
                 "one line, each with a value that works); auto: every size lowered to what the data supplies, and "
                 "the choices said before the run")
    common_draw: int = option(
        30, "ordinary (non-canary) train samples per client that every enabled method audits: the first this many "
            "of the pool's seeded order whose suffix is as long as the longest suffix a method scores. The agreement "
            "matrix compares the methods on these only; each method's own draw must hold them (audit.pa.n, "
            "audit.mia.n, audit.pearl.n at least this; audit.mr.n at least this plus the client's canaries); "
            "0 = no agreement matrix")
    decoding: Decoding = section(Decoding, "decoding preset (conf/audit/decoding)")
    batch_size: int = option(64, "sequences per scoring (log-probability) batch")
    generation_batch_size: int | Literal["auto"] = option(
        "auto", "sequences in flight while generating; auto = sized by the model (many rows for a small model, fewer "
                "for a large one, the KV cache within 2 GiB)")
    generation_backend: Literal["fedmem", "transformers"] = option(
        "fedmem", "fedmem = the decoding loop (continuous batching, preallocated cache, sampling over the candidates); "
                  "transformers = generate on fixed batches; greedy outputs are identical, sampled ones alike in "
                  "distribution")
    merge_adapter: bool = option(
        True, "generate and score on a copy of the audited model with its LoRA adapter merged into the weights (the "
              "same function, one matrix product per projection instead of three); false = on the peft model")
    concurrent: bool | Literal["auto"] = option(
        "auto", "audit the methods that share no model request with another (MR, then Prior-Aware) in a second lane "
                "beside the others, each lane on its share of the cores; the requests are the same either way, and "
                "so are the figures up to the rounding of torch's thread count (a sampled token can turn on it). "
                "auto = lanes for a model whose decoding steps are bound by Python's dispatch rather than by their "
                "matrix products (fedmem.experiment.auditor.LANES_BELOW_PARAMS), one lane after another at every "
                "thread for a larger one. Needs merge_adapter: the methods that switch the adapter off must not do "
                "it under a running generation")
    reveal_text: bool = option(False, "show leaked text excerpts in reports instead of hash + length")
    keep_updates: bool = option(
        False, "keep each client's update of every round after the run (round_<r>/updates/), for re-audits with a "
               "method that scores them (sia); false: a run keeps them only while such a method audits their round")
    stop_on_degenerate: bool = option(
        False, "end the run, failed, at the first round whose global model is degenerate (non-finite weights or "
               "logits, a model the noise destroyed); false: record such a round as degenerate and go on")
    sections: dict[str, Any] = option_factory({}, "per-method config sections, by method name")

    def __post_init__(self):
        if isinstance(self.decoding, dict):
            self.decoding = build_section(Decoding, self.decoding, "audit.decoding")
        check_fields(self, "audit")
        positive(self, "audit", "prefix_len", "batch_size")
        if self.common_draw < 0:
            raise ValueError(f"audit.common_draw must be >= 0, got {self.common_draw}")
        if self.generation_batch_size != "auto":
            positive(self, "audit", "generation_batch_size")
        if self.concurrent is True and not self.merge_adapter:
            raise ValueError("audit.concurrent=true needs audit.merge_adapter=true (the methods that switch the "
                             "adapter off must not do it under a running generation); set one of them otherwise")
        for name in ("samples_per_client", "test_per_client"):
            if getattr(self, name) != "all":
                positive(self, "audit", name)
