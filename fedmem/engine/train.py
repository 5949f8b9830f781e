"""The local training loop: one client's round, or one epoch of the centralized baseline.

Plain PyTorch: shuffled micro-batches, gradient accumulation up to the effective batch, AdamW over the LoRA
weights only, and any term the strategy adds to the loss (FedProx's proximal term). The loss covers the whole rendered
conversation (user turn included): the memorization text lives in the user turn, and it is exactly what the
audits look for, as in the paper's supervised fine-tuning.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from fedmem.common.progress import progress_bar
from fedmem.data.templates import format_example
from fedmem.engine.batching import language_model_batch
from fedmem.engine.config import TrainConfig


def tokenize_examples(records, tokenizer, plain: bool = False) -> list[list[int]]:
    """Token ids of each record rendered as trained on (chat template, or plain text), not truncated."""
    texts = [format_example(tokenizer, r.user, r.assistant, plain) for r in records]
    return list(tokenizer(texts, add_special_tokens=False)["input_ids"])


class TrainingDiverged(ArithmeticError):
    """Local training became non-finite: the loss, the gradient's norm or the weights after an optimizer step. It
    stops there; nothing of it may be averaged into a model. ``untrained``: the model was given so (its very first
    loss, or the gradient of the first step, before any step, is not finite: a global model the noise destroyed), no
    setting of training caused it."""

    def __init__(self, step: int, what: str, loss: float, untrained: bool = False):
        self.step, self.what, self.loss, self.untrained = step, what, loss, untrained
        super().__init__(f"training diverged at step {step}: {what} not finite (loss {loss:.4g})"
                         + (", the model it was given already" if untrained else ""))


def trainable_params(model) -> dict[str, torch.Tensor]:
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def train_local(
    model,
    examples: list[list[int]],
    cfg: TrainConfig,
    seed: int,
    pad_id: int,
    local_term: Callable[[dict, dict], torch.Tensor] | None = None,
    epochs: int | None = None,
    desc: str = "train",
) -> dict[str, float]:
    """Train ``model`` in place; returns mean loss, optimizer steps and example count. ``local_term``: what the
    strategy adds to every optimizer step's loss (FedProx's proximal term), a function of the trainable weights and
    their values at the start. A loss, gradient norm or weight that is not finite stops it with
    :class:`TrainingDiverged`, naming the optimizer step."""
    if not examples:
        raise ValueError("train_local got no examples")
    dev = next(model.parameters()).device
    torch.manual_seed(seed)  # dropout masks
    gen = torch.Generator().manual_seed(seed)  # shuffling
    params = trainable_params(model)
    at_start = {n: p.detach().clone() for n, p in params.items()} if local_term is not None else None
    opt = torch.optim.AdamW(params.values(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    epochs = cfg.local_epochs if epochs is None else epochs
    micro = math.ceil(len(examples) / cfg.batch_size)
    steps_per_epoch = math.ceil(micro / cfg.grad_accum)
    model.train()
    total, count, steps = 0.0, 0, 0
    with progress_bar(epochs * steps_per_epoch, desc, enabled=cfg.progress) as bar:
        for _ in range(epochs):
            order = torch.randperm(len(examples), generator=gen).tolist()
            batches = [order[i : i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]
            for start in range(0, len(batches), cfg.grad_accum):
                group = batches[start : start + cfg.grad_accum]
                n_seq = sum(len(b) for b in group)
                for b in group:
                    ids, labels, att = language_model_batch([examples[i] for i in b], pad_id)
                    loss = model(input_ids=ids.to(dev), attention_mask=att.to(dev), labels=labels.to(dev)).loss
                    if not math.isfinite(value := loss.item()):
                        raise TrainingDiverged(steps + 1, "the loss", value, untrained=steps == 0 and count == 0)
                    total += value * len(b)
                    count += len(b)
                    # weight each micro-batch by its share of the step's sequences (last group may be short)
                    (loss * (len(b) / n_seq)).backward()
                if local_term is not None:
                    local_term(params, at_start).backward()
                # the norm is taken even when nothing is clipped (an infinite bound): a non-finite gradient stops here
                norm = torch.nn.utils.clip_grad_norm_(params.values(), cfg.max_grad_norm or math.inf)
                if not math.isfinite(float(norm)):  # at the first step no setting of training has acted yet
                    raise TrainingDiverged(steps + 1, "the gradient's norm", value, untrained=steps == 0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                steps += 1
                if not all(bool(torch.isfinite(p).all()) for p in params.values()):
                    raise TrainingDiverged(steps, "the weights", value)
                bar.advance(loss=total / max(count, 1))
    model.eval()
    return {"train_loss": total / max(count, 1), "steps": steps, "num_examples": len(examples)}
