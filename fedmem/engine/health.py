"""Whether a model can be audited as a language model at all: a global model that DP noise (or a diverged client)
destroyed is a finding of the run, to be recorded as such, not a crash inside the first audit that samples from it.

Three checks, cheap beside any audit, on a few of the audit's own prompts: the adapter's weights are finite; the
model's next-token logits are finite (a model with non-finite logits has no next-token distribution: sampling from it
fails, and every log-probability is meaningless); and its mean next-token loss on those prompts is within
``LOSS_FACTOR`` times log V of the uniform guess over its V tokens. Noise far above the update it protects can leave
every weight and logit finite but the model confidently wrong on every token (a loss of thousands of nats where the
uniform guess scores log V, under 12): its distributions mean nothing, and the first gradient a client takes from
it overflows.
"""

from __future__ import annotations

import math

import torch


def adapter_norm(state: dict[str, torch.Tensor]) -> float:
    """The L2 norm of an adapter's weights (inf or nan where some weight is)."""
    return math.sqrt(sum(float((t.double() ** 2).sum()) for t in state.values()))


LOSS_FACTOR = 10  # a mean loss this many times the uniform guess's log V: no language model, however poor, is there


def degenerate(model, state: dict[str, torch.Tensor], prompts: list[tuple[int, ...]]) -> str | None:
    """Why ``model`` (carrying the adapter ``state``) has no usable next-token distributions, or None: non-finite
    adapter weights, non-finite logits on any of ``prompts`` (token ids), or a mean next-token loss on them above
    ``LOSS_FACTOR`` times log V."""
    bad = sum(int((~torch.isfinite(t)).sum()) for t in state.values())
    if bad:
        return f"{bad} of its {sum(t.numel() for t in state.values())} adapter weights are not finite"
    dev = next(model.parameters()).device
    failing, losses, vocab = 0, [], 0
    with torch.inference_mode():
        for ids in prompts:
            x = torch.tensor([list(ids)], device=dev)
            logits = model(input_ids=x).logits[0].float()
            vocab = logits.shape[-1]
            if not bool(torch.isfinite(logits).all()):
                failing += 1
            elif len(ids) > 1:
                losses.append(float(torch.nn.functional.cross_entropy(logits[:-1], x[0, 1:])))
    if failing:
        return f"its next-token logits are not finite on {failing} of {len(prompts)} audit prompts"
    if losses and (loss := sum(losses) / len(losses)) > LOSS_FACTOR * math.log(vocab):
        return (f"its mean next-token loss on {len(losses)} audit prompts is {loss:.4g} nats, over {LOSS_FACTOR} times "
                f"the uniform guess's log V = {math.log(vocab):.3g}: confidently wrong on every token")
    return None
