"""The log-probability engine against exact values on a toy causal LM whose every probability can be enumerated.

The toy model is a real Qwen2ForCausalLM (vocabulary of 8 tokens, random weights): the exact P(s|p) is the
chain rule over separate, unbatched full forward passes on p + s_<t, one per suffix token, with no cache, no
padding and no batching; the engine must reproduce it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from fedmem.engine.model.tiny import qwen2_model
from fedmem.engine.scoring import (
    PAD_SLACK,
    prior_logprobs,
    sequence_logprobs,
    suffix_blocks,
    token_logprobs,
)

VOCAB = 8


pytestmark = pytest.mark.usefixtures("one_torch_thread")



def toy_model(seed: int = 0, pad_token_id: int | None = 0):
    model = qwen2_model(VOCAB, 32, 64, 2, 4, 2, seed=seed, max_position_embeddings=64, pad_token_id=pad_token_id)
    # Random init is nearly uniform over 8 tokens; sharpen it so that probabilities differ visibly.
    with torch.no_grad():
        model.lm_head.weight.mul_(30.0)
    return model.eval()


@torch.inference_mode()
def exact_logprob(model, prefix, suffix) -> float:
    """Chain rule with one separate full forward per suffix token: sum_t log softmax(f(p + s_<t))[-1][s_t]."""
    total = 0.0
    for t in range(len(suffix)):
        audited = torch.tensor([list(prefix) + list(suffix[:t])], dtype=torch.long)
        probs = torch.softmax(model(input_ids=audited).logits[0, -1].double(), dim=-1)
        total += math.log(float(probs[suffix[t]]))
    return total


@pytest.fixture(scope="module")
def model():
    return toy_model()


def random_pairs(n, rng, max_prefix=5, max_suffix=6, min_suffix=1):
    return [
        (tuple(int(t) for t in rng.integers(0, VOCAB, rng.integers(1, max_prefix + 1))),
         tuple(int(t) for t in rng.integers(0, VOCAB, rng.integers(min_suffix, max_suffix + 1))))
        for _ in range(n)
    ]


def test_engine_equals_exact_chain_rule_product(model):
    rng = np.random.default_rng(1)
    pairs = random_pairs(12, rng)
    exact = np.array([exact_logprob(model, p, s) for p, s in pairs])
    assert np.ptp(exact) > 1.0  # the toy model is not uniform: the check below is not trivially satisfied
    np.testing.assert_allclose(sequence_logprobs(model, pairs, batch_size=4), exact, atol=1e-5, rtol=0)
    np.testing.assert_allclose(
        prior_logprobs(model, [p for p, _ in pairs], [s for _, s in pairs], batch_size=16).diagonal(), exact,
        atol=1e-5, rtol=0,
    )
    # per-token values are the individual chain-rule factors
    p, s = pairs[0]
    toks = token_logprobs(model, [(p, s)])[0]
    assert toks.shape == (len(s),)
    np.testing.assert_allclose(toks.cumsum(), [exact_logprob(model, p, s[: t + 1]) for t in range(len(s))], atol=1e-5)


def test_all_suffixes_of_a_length_sum_to_one(model):
    """Enumerating every suffix of length 3 (8^3 of them): the engine's P(.|q) is a proper distribution."""
    suffixes = list(itertools.product(range(VOCAB), repeat=3))
    prefixes = [(1,), (3, 0, 7), (2, 2, 2, 2)]
    lp = prior_logprobs(model, prefixes, suffixes, batch_size=64)
    np.testing.assert_allclose(np.logaddexp.reduce(lp, axis=1), 0.0, atol=1e-5)


def test_batched_equals_unbatched(model):
    rng = np.random.default_rng(2)
    pairs = random_pairs(23, rng, max_prefix=7, max_suffix=9)
    one = sequence_logprobs(model, pairs, batch_size=1)
    for bs in (3, 8, 64):
        np.testing.assert_allclose(sequence_logprobs(model, pairs, batch_size=bs), one, atol=1e-5, rtol=0)
    per_tok = token_logprobs(model, pairs, batch_size=1)
    for a, b in zip(token_logprobs(model, pairs, batch_size=7), per_tok):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)


def test_padding_is_masked_whatever_the_pad_id():
    rng = np.random.default_rng(3)
    pairs = random_pairs(10, rng, max_prefix=4, max_suffix=8)
    qs, ss = [p for p, _ in pairs], [s for _, s in pairs]
    ref_seq = ref_prior = None
    m = toy_model(seed=0)
    for pad in (0, 5, None):
        m.config.pad_token_id = pad  # the id written into padded slots: must not matter
        seq, pri = sequence_logprobs(m, pairs, batch_size=10), prior_logprobs(m, qs, ss, batch_size=10)
        if ref_seq is None:
            ref_seq, ref_prior = seq, pri
        np.testing.assert_allclose(seq, ref_seq, atol=1e-5, rtol=0)
        np.testing.assert_allclose(pri, ref_prior, atol=1e-5, rtol=0)


def test_prior_logprobs_equals_sequence_logprobs_on_every_combination(model):
    rng = np.random.default_rng(4)
    # mixed prefix lengths (several length groups), a duplicated prefix and suffix, an empty suffix
    qs = [p for p, _ in random_pairs(6, rng, max_prefix=5)]
    qs += [qs[0], qs[2]]
    ss = [s for _, s in random_pairs(9, rng, max_suffix=7)] + [(), (4,)]
    ss.append(ss[1])
    full = sequence_logprobs(model, [(q, s) for q in qs for s in ss], batch_size=16).reshape(len(qs), len(ss))
    assert full[:, ss.index(())].tolist() == [0.0] * len(qs)
    for bs in (1, 5, 12, 200):
        got = prior_logprobs(model, qs, ss, batch_size=bs)
        assert got.shape == (len(qs), len(ss))
        np.testing.assert_allclose(got, full, atol=1e-5, rtol=0)


def test_progress_counts_every_scored_pair_and_combination(model):
    """The audit's stage bars: ``progress`` adds up to the pairs scored, and for the prior to the distinct
    (prefix, non-empty suffix) combinations, the total ``AuditedModel.prior_logprobs`` gives its bar."""
    rng = np.random.default_rng(5)
    pairs = random_pairs(7, rng)
    done = []
    sequence_logprobs(model, pairs, batch_size=3, progress=done.append)
    assert done == [3, 3, 1]
    qs = [p for p, _ in pairs] + [pairs[0][0]]
    ss = [s for _, s in pairs] + [(), pairs[1][1]]
    done.clear()
    prior_logprobs(model, qs, ss, batch_size=4, progress=done.append)
    assert sum(done) == len(set(qs)) * len({s for s in ss if s})


def test_prior_logprobs_on_a_lora_model_restores_training_mode():
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(toy_model(seed=5), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():  # make the adapter non-trivial
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    model.train()
    rng = np.random.default_rng(6)
    pairs = random_pairs(6, rng)
    qs, ss = [p for p, _ in pairs], [s for _, s in pairs]
    full = sequence_logprobs(model, [(q, s) for q in qs for s in ss]).reshape(len(qs), len(ss))
    np.testing.assert_allclose(prior_logprobs(model, qs, ss, batch_size=8), full, atol=1e-5, rtol=0)
    assert model.training


def test_empty_prefix_is_rejected(model):
    with pytest.raises(ValueError, match="non-empty prefix"):
        sequence_logprobs(model, [((), (1, 2))])
    with pytest.raises(ValueError, match="non-empty prefixes"):
        prior_logprobs(model, [(1,), ()], [(1, 2)])
    with pytest.raises(ValueError, match="batch_size"):
        prior_logprobs(model, [(1,)], [(1, 2)], batch_size=0)


def test_suffix_blocks_cover_everything_with_bounded_padding():
    rng = np.random.default_rng(7)
    lengths = rng.integers(1, 140, 200).tolist()
    blocks = suffix_blocks(lengths, max_rows=32)
    assert sorted(j for b in blocks for j in b) == list(range(200))
    for b in blocks:
        lens = [lengths[j] for j in b]
        assert len(b) <= 32 and len(b) * max(lens) <= PAD_SLACK * sum(lens)
    # equal lengths fill blocks to the cap; one long outlier does not pad the short ones
    assert [len(b) for b in suffix_blocks([64] * 70, max_rows=32)] == [32, 32, 6]
    assert suffix_blocks([10] * 5 + [100], max_rows=64) == [[0, 1, 2, 3, 4], [5]]
