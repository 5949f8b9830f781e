"""Generation for many prompts at once: fedmem's decoding loop, or transformers' ``generate`` on fixed batches.

Every audit method that needs model outputs goes through :func:`generate_batched` (via
``AuditedModel.generate``), so a round makes one generation pass per distinct request. Prompts are sorted by
length before batching so that batches carry little padding; outputs are returned in the caller's order.

Two backends give the same outputs' distribution (greedy: the same tokens): ``fedmem``
(:func:`fedmem.engine.decoder.decode`: continuous batching, a preallocated cache, sampling over the candidates only) and
``transformers`` (``generate`` on fixed, left-padded batches), kept so that any figure can be compared between
them. A decoding rule the loop does not implement (a model whose generation config adds a repetition penalty, say)
is decoded by ``generate`` whichever backend is asked.

Decoding starts from the model's own generation config, as ``generate`` does by default and the cross-client
paper's code relies on, and a preset changes one knob (SPEC §3). A generation ends at the model's end of turn
(any of its end-of-sequence ids) or at the cap.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from fedmem.engine.batching import pad_batch
from fedmem.engine.config import Decoding
from fedmem.engine.decoder import decode, text_config
from fedmem.engine.sampler import sampler_for

# The generation settings that change which tokens are drawn: what a report states as the decoding used.
DECODING_KEYS = ("do_sample", "num_beams", "top_k", "top_p", "min_p", "typical_p", "temperature",
                 "repetition_penalty", "no_repeat_ngram_size")
SAMPLING_ONLY = {"top_k", "top_p", "min_p", "typical_p", "temperature"}


def sampling_kwargs(decoding: Decoding) -> dict:
    """``generate`` arguments of a decoding preset: the one knob it changes (SPEC §3); every other setting is the
    model's own generation config, as ``generate`` resolves it."""
    if decoding.strategy == "greedy":
        return {"do_sample": False, "num_beams": 1}
    knob = {"top_k": {"top_k": decoding.top_k}, "top_p": {"top_p": decoding.top_p},
            "temperature": {"temperature": decoding.temperature}}[decoding.strategy]
    return {"do_sample": True, **knob}


def _base(model):
    """The transformers model under a peft wrapper (whose ``generate`` forwards to it)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def decoding_used(model, decoding: Decoding) -> dict:
    """The values ``generate`` decodes with for ``decoding`` on ``model``: the preset's knob over the model's
    generation config over transformers' defaults, resolved by the same call ``generate`` makes. Sampling knobs
    are left out of a greedy preset, where they do nothing."""
    config, _ = _base(model)._prepare_generation_config(None, **sampling_kwargs(decoding))
    used = {k: getattr(config, k, None) for k in DECODING_KEYS if config.do_sample or k not in SAMPLING_ONLY}
    return {"strategy": decoding.strategy, **{k: v for k, v in used.items() if v is not None}}


def stop_ids(model, tokenizer) -> list[int]:
    """Every id that ends a generation: the tokenizer's end-of-sequence id and the model generation config's
    (a chat model may list its end-of-turn id there)."""
    ids = {tokenizer.eos_token_id}
    eos = getattr(_base(model).generation_config, "eos_token_id", None)
    ids |= set(eos) if isinstance(eos, (list, tuple)) else {eos}
    return sorted(i for i in ids if i is not None)


def hit_cap(ids: list[int], max_new_tokens: int) -> bool:
    """Whether a continuation returned by :func:`generate_batched` ran to the cap instead of ending its turn (an
    ended one is cut before its end-of-sequence id, so it is shorter than the cap)."""
    return len(ids) >= max_new_tokens


def _pad_and_stop(model, tokenizer) -> tuple[int, set[int]]:
    """The padding id and every id that ends a continuation (end of sequence, and padding: ``_trim`` cuts there)."""
    eos = stop_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos[0]
    return pad_id, set(eos) | {pad_id}


def _decode_loop(model, tokenizer, prompts, max_new_tokens, num_samples, sampler, seed, rows, progress):
    """:func:`fedmem.engine.decoder.decode` over the prompts sorted by length, in the caller's order; greedy samples are
    decoded once and copied, as the ``generate`` path does."""
    pad_id, stop = _pad_and_stop(model, tokenizer)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    each = num_samples if sampler.do_sample else 1
    generator = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    was_training = model.training
    model.eval()
    outs = decode(model, [tuple(prompts[i]) for i in order], max_new_tokens, stop, pad_id, sampler, rows,
                  num_samples=each, generator=generator, progress=progress)
    if was_training:
        model.train()
    result: list = [None] * len(prompts)
    for i, o in zip(order, outs):
        result[i] = o * num_samples if each == 1 and num_samples > 1 else o
    return result


def _trim(ids: list[int], stop: set[int]) -> list[int]:
    for i, t in enumerate(ids):
        if t in stop:
            return ids[:i]
    return ids


# Sequences in flight, sized by the model: enough rows that a decoding step's matrix products run near the CPU's
# matmul rate (a step costs about STEP_FLOPS), few enough that their KV cache stays within KV_BUDGET bytes.
STEP_FLOPS = 2**36
KV_BUDGET = 2**31
MAX_ROWS = 256


def auto_rows(model, span: int) -> int:
    """Rows for the decoding loop on ``model`` when each row may hold ``span`` tokens: the most whose step costs at
    most ``STEP_FLOPS`` (2 FLOPs per parameter per token) and whose cache fits ``KV_BUDGET``, at most ``MAX_ROWS``."""
    params = sum(p.numel() for p in model.parameters())
    config = text_config(model)
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    itemsize = next(model.parameters()).element_size()
    kv_per_row = 2 * config.num_hidden_layers * heads * head_dim * span * itemsize
    return max(1, int(min(STEP_FLOPS / (2 * params), KV_BUDGET / kv_per_row, MAX_ROWS)))


@torch.inference_mode()
def generate_batched(
    model,
    tokenizer,
    prompts: list[tuple[int, ...]] | list[list[int]],
    max_new_tokens: int,
    num_samples: int = 1,
    decoding: Decoding | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    progress: Callable[[int], object] | None = None,
    backend: str = "fedmem",
) -> list[list[list[int]]]:
    """Continuations (prompt excluded, cut at the first end-of-sequence id) for every prompt.

    Returns ``out[i][r]``: the r-th of ``num_samples`` continuations of ``prompts[i]``. ``batch_size`` counts
    sequences (prompts x samples) in flight (None: :func:`auto_rows`). Sampling is seeded once per call, so the
    same call on the same model gives the same outputs. ``progress(k)`` is called as k more prompts are done.
    """
    decoding = decoding or Decoding()
    if batch_size is None:
        batch_size = auto_rows(model, max((len(p) for p in prompts), default=0) + max_new_tokens)
    sampler, _ = sampler_for(_base(model), sampling_kwargs(decoding)) if backend == "fedmem" else (None, "")
    if sampler is not None:
        return _decode_loop(model, tokenizer, prompts, max_new_tokens, num_samples, sampler, seed, batch_size,
                            progress)
    num_samples_gen = 1 if decoding.strategy == "greedy" else num_samples  # greedy samples are identical: copy
    eos = stop_ids(model, tokenizer)
    pad_id, stop = _pad_and_stop(model, tokenizer)
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
        input_ids, attention = pad_batch([prompts[i] for i in idx], pad_id, left=True)
        width = input_ids.shape[1]
        gen = model.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention.to(device),
            max_new_tokens=max_new_tokens,
            num_return_sequences=num_samples_gen,
            pad_token_id=pad_id,
            eos_token_id=eos,
            use_cache=True,
            **kw,
        )
        new = gen[:, width:].tolist()
        for row, i in enumerate(idx):
            outs = [_trim(new[row * num_samples_gen + r], stop) for r in range(num_samples_gen)]
            out[i] = outs * num_samples if num_samples_gen == 1 and num_samples > 1 else outs
        if progress is not None:
            progress(len(idx))
    if was_training:
        model.train()
    return out  # type: ignore[return-value]
