"""Batched, left-padded, KV-cached generation for many prompts at once.

Every audit method that needs model outputs goes through :func:`generate_batched` (via
``RoundContext.generate``), so a round makes one generation pass per distinct request. Prompts are sorted by
length before batching so that batches carry little padding; outputs are returned in the caller's order.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from fedmem.config import Decoding


def sampling_kwargs(decoding: Decoding) -> dict:
    """``generate`` arguments of a decoding preset (SPEC §3).

    Each preset changes one knob from greedy decoding and leaves the others neutral (top_k=0 disables top-k,
    top_p=1.0 disables nucleus), so a preset means exactly what its name says.
    """
    if decoding.strategy == "greedy":
        return {"do_sample": False, "top_k": None, "top_p": None, "temperature": None}
    kw = {"do_sample": True, "top_k": 0, "top_p": 1.0, "temperature": 1.0}
    if decoding.strategy == "top_k":
        kw["top_k"] = decoding.top_k
    elif decoding.strategy == "top_p":
        kw["top_p"] = decoding.top_p
    else:
        kw["temperature"] = decoding.temperature
    return kw


def _trim(ids: list[int], stop_ids: set[int]) -> list[int]:
    for i, t in enumerate(ids):
        if t in stop_ids:
            return ids[:i]
    return ids


@torch.inference_mode()
def generate_batched(
    model,
    tokenizer,
    prompts: list[tuple[int, ...]] | list[list[int]],
    max_new_tokens: int,
    num_samples: int = 1,
    decoding: Decoding | None = None,
    seed: int = 0,
    batch_size: int = 32,
    progress: Callable[[int], object] | None = None,
) -> list[list[list[int]]]:
    """Continuations (prompt excluded, cut at the first end-of-sequence) for every prompt.

    Returns ``out[i][r]``: the r-th of ``num_samples`` continuations of ``prompts[i]``. ``batch_size`` counts
    sequences (prompts x samples) per forward pass. Sampling is seeded once per call, so the same call on the
    same model gives the same outputs. ``progress(k)`` is called after each batch with its number of prompts.
    """
    decoding = decoding or Decoding()
    if decoding.strategy == "greedy":
        num_samples_gen = 1  # greedy samples are identical: compute once, copy
    else:
        num_samples_gen = num_samples
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    stop_ids = {t for t in (tokenizer.eos_token_id, pad_id) if t is not None}
    device = next(model.parameters()).device
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    per_batch = max(1, batch_size // num_samples_gen)
    out: list[list[list[int]] | None] = [None] * len(prompts)
    torch.manual_seed(seed)
    kw = sampling_kwargs(decoding)
    was_training = model.training
    model.eval()
    for start in range(0, len(order), per_batch):
        idx = order[start : start + per_batch]
        width = max(len(prompts[i]) for i in idx)
        input_ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(idx), width), dtype=torch.long)
        for row, i in enumerate(idx):  # left padding: the last prompt token sits at the right edge
            p = list(prompts[i])
            input_ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            attention[row, width - len(p) :] = 1
        gen = model.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention.to(device),
            max_new_tokens=max_new_tokens,
            num_return_sequences=num_samples_gen,
            pad_token_id=pad_id,
            eos_token_id=tokenizer.eos_token_id,
            use_cache=True,
            **kw,
        )
        new = gen[:, width:].tolist()
        for row, i in enumerate(idx):
            outs = [_trim(new[row * num_samples_gen + r], stop_ids) for r in range(num_samples_gen)]
            out[i] = outs * num_samples if num_samples_gen == 1 and num_samples > 1 else outs
        if progress is not None:
            progress(len(idx))
    if was_training:
        model.train()
    return out  # type: ignore[return-value]
