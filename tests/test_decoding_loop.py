"""fedmem's decoding loop against transformers' ``generate``: greedy tokens identical (rows leaving, prompts taking
their places, the cache shifting, several samples per prompt, a LoRA-wrapped model), the sampler's distribution
equal to transformers' logits processors by a chi-square test, the model's generation config honoured, and a rule
the loop does not implement handed to ``generate``."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
from scipy import stats
from transformers import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from fedmem.engine.config import Decoding
from fedmem.engine.decoder import decode
from fedmem.engine.generation import MAX_ROWS, auto_rows, generate_batched
from fedmem.engine.model.tiny import qwen2_model
from fedmem.engine.sampler import Sampler, sampler_for


@pytest.fixture(scope="module")
def model():
    return qwen2_model(512, 64, 128, 2, 2, 1, seed=0, max_position_embeddings=512).eval()


def prompts_of(n: int, seed: int, low: int = 3, high: int = 40) -> list[tuple[int, ...]]:
    g = torch.Generator().manual_seed(seed)
    return [tuple(torch.randint(3, 500, (int(torch.randint(low, high, (1,), generator=g)),), generator=g).tolist())
            for _ in range(n)]


def generate_one_by_one(model, prompts, cap: int, stop: set[int]) -> list[list[int]]:
    """transformers' greedy ``generate``, one unpadded prompt per call, cut before the first stop id."""
    out = []
    for p in prompts:
        new = model.generate(input_ids=torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                             max_new_tokens=cap, do_sample=False, eos_token_id=sorted(stop), pad_token_id=0)[0, len(p):]
        new = new.tolist()
        out.append(new[: next((k for k, t in enumerate(new) if t in stop), len(new))])
    return out


@pytest.fixture(scope="module")
def frequent_stops(model):
    """Stop ids that the model draws often, so that greedy continuations end at many different lengths."""
    free = generate_one_by_one(model, prompts_of(40, seed=1), 60, {1})
    return {t for t, _ in collections.Counter(t for o in free for t in o).most_common(5)}


@pytest.fixture(scope="module")
def greedy_reference(model, frequent_stops):
    prompts = prompts_of(40, seed=1)
    return prompts, generate_one_by_one(model, prompts, 90, frequent_stops)


@pytest.mark.parametrize("rows", [1, 3, 16, 64])
def test_greedy_tokens_equal_generate_whatever_the_rows(model, frequent_stops, greedy_reference, rows):
    prompts, ref = greedy_reference
    lengths = sorted(len(r) for r in ref)
    assert lengths[0] < 10 and lengths[-1] == 90 and len(set(lengths)) > 8  # rows really end at many steps
    out = decode(model, prompts, 90, frequent_stops, 0, Sampler(), rows=rows)
    assert [o[0] for o in out] == ref


def test_the_cache_shifts_when_rows_outlive_its_width(model, frequent_stops):
    """Many short prompts through two slots: the write column passes the buffer's end many times."""
    prompts = prompts_of(30, seed=2, low=2, high=6)
    ref = generate_one_by_one(model, prompts, 40, frequent_stops)
    assert [o[0] for o in decode(model, prompts, 40, frequent_stops, 0, Sampler(), rows=2)] == ref


def test_samples_of_one_prompt_share_a_prefill_and_are_each_greedy(model, frequent_stops):
    prompts = prompts_of(12, seed=3)
    ref = generate_one_by_one(model, prompts, 30, frequent_stops)
    out = decode(model, prompts, 30, frequent_stops, 0, Sampler(), rows=7, num_samples=3)
    assert all(o == [r, r, r] for o, r in zip(out, ref))


def test_greedy_equal_generate_on_a_lora_model_through_generate_batched(model):
    from peft import LoraConfig, get_peft_model

    class Tok:
        pad_token_id, eos_token_id = 0, 7

    lora = get_peft_model(qwen2_model(512, 64, 128, 2, 2, 1, seed=0, max_position_embeddings=512),
                          LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)).eval()
    prompts = prompts_of(20, seed=4)
    greedy = Decoding("greedy")
    new = generate_batched(lora, Tok(), prompts, 25, decoding=greedy, batch_size=6, backend="fedmem")
    old = generate_batched(lora, Tok(), prompts, 25, decoding=greedy, batch_size=6, backend="transformers")
    assert new == old
    base = generate_batched(model, Tok(), prompts, 25, decoding=greedy, batch_size=6)
    assert base != new  # the adapter is really applied


def warped(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """transformers' own distribution: its warpers in generate's order, then softmax."""
    processors = LogitsProcessorList([TemperatureLogitsWarper(temperature), TopKLogitsWarper(top_k),
                                      TopPLogitsWarper(top_p)])
    probs = processors(None, logits[None].clone())[0].softmax(-1).double()
    return probs / probs.sum()  # float32 rounding: the chi-square test needs totals that agree to 1e-8


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 40, 1.0), (0.7, 0, 0.8), (1.3, 20, 0.9)])
def test_sampler_draws_transformers_distribution(temperature, top_k, top_p):
    logits = torch.randn(300, generator=torch.Generator().manual_seed(0)) * 2
    expected = warped(logits, temperature, top_k or 300, top_p).numpy()
    draws = Sampler(True, temperature, top_k, top_p).draw(logits.expand(60_000, -1), torch.Generator().manual_seed(1))
    counts = np.bincount(draws.numpy(), minlength=300)
    assert counts[expected == 0].sum() == 0  # nothing outside the kept candidates
    kept = expected > 0
    # pool the rare tokens so that every expected count is >= 5, as the chi-square approximation needs
    order = np.argsort(expected[kept])[::-1]
    obs, exp = counts[kept][order], expected[kept][order] * counts.sum()
    cut = int(np.searchsorted(-exp, -5.0))

    def pooled(x):
        return np.append(x[:cut], x[cut:].sum()) if cut < len(x) else x

    assert stats.chisquare(pooled(obs), pooled(exp)).pvalue > 1e-3
    # and the test has power: a flat draw over the same candidates is rejected
    assert stats.chisquare(pooled(obs), pooled(np.full(len(obs), counts.sum() / len(obs)))).pvalue < 1e-6


def test_decode_samples_its_first_token_from_the_models_distribution(model):
    """The whole loop, not the sampler alone: 4,000 one-token continuations of one prompt against the model's own
    top-k distribution for it."""
    prompt = prompts_of(1, seed=5)[0]
    logits = model(input_ids=torch.tensor([prompt])).logits[0, -1].detach()
    expected = warped(logits, 1.0, 40, 1.0).numpy()
    out = decode(model, [prompt], 1, set(), 0, Sampler(True, 1.0, 40, 1.0), rows=512, num_samples=4000,
                 generator=torch.Generator().manual_seed(0))
    counts = np.bincount([o[0] for o in out[0]], minlength=len(expected))
    kept = expected > 0
    assert counts[~kept].sum() == 0
    assert stats.chisquare(counts[kept], expected[kept] * counts.sum()).pvalue > 1e-3


def test_seeded_sampling_repeats_and_a_new_seed_differs(model):
    class Tok:
        pad_token_id, eos_token_id = 0, 7

    prompts = prompts_of(10, seed=6)
    a, b, c = (generate_batched(model, Tok(), prompts, 20, num_samples=2, seed=s, batch_size=8) for s in (1, 1, 2))
    assert a == b and a != c


def test_the_models_generation_config_is_honoured_and_other_rules_go_to_generate(model):
    model.generation_config.temperature = 0.6
    model.generation_config.top_k = 50
    try:
        rule, _ = sampler_for(model, {"do_sample": True, "top_p": 0.8})
        assert rule == Sampler(True, 0.6, 50, 0.8)
        assert sampler_for(model, {"do_sample": False, "num_beams": 1})[0] == Sampler()
        model.generation_config.repetition_penalty = 1.3
        rule, why = sampler_for(model, {"do_sample": False, "num_beams": 1})
        assert rule is None and "RepetitionPenaltyLogitsProcessor" in why

        class Tok:
            pad_token_id, eos_token_id = 0, 7

        prompts = prompts_of(6, seed=7)
        greedy = Decoding("greedy")
        assert (generate_batched(model, Tok(), prompts, 15, decoding=greedy, backend="fedmem")
                == generate_batched(model, Tok(), prompts, 15, decoding=greedy, backend="transformers"))
    finally:
        model.generation_config.temperature, model.generation_config.top_k = 1.0, 50
        model.generation_config.repetition_penalty = 1.0


def test_auto_rows_are_bounded_by_the_step_cost_and_the_cache_memory(model, monkeypatch):
    import fedmem.engine.generation as generation

    assert auto_rows(model, 300) == MAX_ROWS  # a small model: the cap
    assert 1 <= auto_rows(model, 200_000) < MAX_ROWS  # rows of 200,000 tokens: the cache's budget bounds them
    params = sum(p.numel() for p in model.parameters())
    monkeypatch.setattr(generation, "STEP_FLOPS", 2 * params * 40)  # a step may cost 40 rows' worth of FLOPs
    assert auto_rows(model, 300) == 40



def test_merged_copy_computes_what_the_lora_model_computes_and_leaves_it_as_it_was():
    """The tiny preset adapts its output layer, tied to the input embeddings: merged without untying, the adapter
    would change the embeddings too."""
    from peft import LoraConfig, get_peft_model

    from fedmem.engine.model.load import merged_copy
    from tests.helpers import tiny_model, tiny_tokenizer

    tok = tiny_tokenizer()
    lora = get_peft_model(tiny_model(tok), LoraConfig(r=4, target_modules=["q_proj", "v_proj", "lm_head"],
                                                      init_lora_weights=False)).eval()
    ids = torch.tensor([prompts_of(1, seed=8, low=20, high=21)[0]])
    before = lora(input_ids=ids).logits.detach()
    merged = merged_copy(lora)
    assert not hasattr(merged, "peft_config")
    assert torch.allclose(merged(input_ids=ids).logits, before, atol=1e-4)
    assert torch.equal(lora(input_ids=ids).logits, before)  # the audited model is untouched
    with lora.disable_adapter():
        base = lora(input_ids=ids).logits
    assert not torch.allclose(base, before, atol=1e-2)  # the adapter matters, so the check above has teeth
