"""The next-token draw of fedmem's decoding loop: greedy, or sampling over the candidate tokens only.

transformers' ``generate`` turns the logits into a distribution over the whole vocabulary (temperature, then
top-k, then top-p, each masking the rest to -inf) and draws from all of it. The same distribution is reached by
keeping only the top-k candidates first: every token outside them has probability 0 after the top-k warper, so
the draw over k values is the same draw. Top-p then keeps, among the candidates sorted by probability, the
smallest set whose mass reaches ``top_p`` (at least one token), exactly as ``TopPLogitsWarper`` does.

The settings come from transformers itself: :func:`sampler_for` asks the model for the logits processors that
``generate`` would build for the decoding preset and reads temperature, top-k and top-p off them, so the model's
own generation config is honoured as ``generate`` honours it. A processor this draw does not implement
(repetition penalty, min-p, no-repeat n-grams, beams, ...) makes :func:`sampler_for` return None with the reason:
the caller then decodes with ``generate``.

One difference, of measure zero for real logits: ``TopKLogitsWarper`` keeps every token tied with the k-th
largest logit, this draw keeps exactly k.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Sampler:
    """One decoding rule: greedy when ``do_sample`` is False, else temperature, top-k (0: no cut) and top-p."""

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def draw(self, logits: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """One token id per row of ``logits`` ``[rows, vocab]``."""
        if not self.do_sample:
            return logits.argmax(-1)
        scores = logits.float()
        if self.temperature != 1.0:
            scores = scores / self.temperature
        k = self.top_k if 0 < self.top_k < scores.shape[-1] else scores.shape[-1]
        values, ids = scores.topk(k, dim=-1, sorted=True)  # descending
        probs = values.softmax(-1)
        if self.top_p < 1.0:
            # TopPLogitsWarper: sorted ascending, drop the tokens whose cumulative mass is <= 1 - top_p, keep the last
            below = probs.flip(-1).cumsum(-1) <= 1 - self.top_p
            below[:, -1] = False
            probs = probs.masked_fill(below.flip(-1), 0.0)
        pick = torch.multinomial(probs, 1, generator=generator)  # renormalises over the kept candidates
        return ids.gather(-1, pick).squeeze(-1)


# the logits processors this draw implements; any other one in generate's list means generate must decode
_KNOWN = {"TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper"}


def sampler_for(base, generation_kwargs: dict) -> tuple[Sampler | None, str]:
    """(the rule ``generate`` applies for ``generation_kwargs`` on the transformers model ``base`` (a peft model's
    base: ``fedmem.engine.generation._base``), "") or (None, why it cannot be reproduced here). Reads transformers' own
    resolution: the generation config ``generate`` prepares and the logits processors it builds from it."""
    from transformers import LogitsProcessorList

    config, _ = base._prepare_generation_config(None, **generation_kwargs)
    if (config.num_beams or 1) > 1:
        return None, f"num_beams={config.num_beams}"
    processors = base._get_logits_processor(config, input_ids_seq_length=1, logits_processor=LogitsProcessorList(),
                                            device="cpu", model_kwargs={})
    other = sorted({type(p).__name__ for p in processors} - _KNOWN)
    if other:
        return None, "generation config applies " + ", ".join(other)
    rule = {"do_sample": bool(config.do_sample)}
    for p in processors:
        name = type(p).__name__
        if name == "TemperatureLogitsWarper":
            rule["temperature"] = float(p.temperature)
        elif name == "TopKLogitsWarper":
            rule["top_k"] = int(p.top_k)
        elif name == "TopPLogitsWarper":
            rule["top_p"] = float(p.top_p)
    return Sampler(**rule), ""
