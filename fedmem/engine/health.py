"""Whether a model can be audited as a language model at all: a global model that DP noise (or a diverged client)
destroyed is a finding of the run, to be recorded as such, not a crash inside the first audit that samples from it.

Two checks, cheap beside any audit: the adapter's weights are finite, and the model's next-token logits on a few of
the audit's own prompts are finite (a model with non-finite logits has no next-token distribution: sampling from it
fails, and every log-probability is meaningless).
"""

from __future__ import annotations

import math

import torch


def adapter_norm(state: dict[str, torch.Tensor]) -> float:
    """The L2 norm of an adapter's weights (inf or nan where some weight is)."""
    return math.sqrt(sum(float((t.double() ** 2).sum()) for t in state.values()))


@torch.inference_mode()
def degenerate(model, state: dict[str, torch.Tensor], prompts: list[tuple[int, ...]]) -> str | None:
    """Why ``model`` (carrying the adapter ``state``) has no usable next-token distributions, or None: non-finite
    adapter weights, or non-finite logits on any of ``prompts`` (token ids)."""
    bad = sum(int((~torch.isfinite(t)).sum()) for t in state.values())
    if bad:
        return f"{bad} of its {sum(t.numel() for t in state.values())} adapter weights are not finite"
    dev = next(model.parameters()).device
    failing = 0
    for ids in prompts:
        logits = model(input_ids=torch.tensor([list(ids)], device=dev)).logits[0, -1]
        failing += not bool(torch.isfinite(logits).all())
    if failing:
        return f"its next-token logits are not finite on {failing} of {len(prompts)} audit prompts"
    return None
