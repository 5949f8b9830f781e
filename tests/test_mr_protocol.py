"""MR's protocol as the cross-client paper's code runs it (SPEC §3), on real tokenizers and a really trained model.

The prefix is the first ``prefix_len`` tokens of the memorization text, the suffix all the rest of it; the prompt
is the chat template's header with the raw prefix in the user turn, the turn left open, so the model continues
the client's text instead of answering it.
"""

from __future__ import annotations

import pytest
from helpers import USER_TEMPLATE, texts, tiny_model, tiny_tokenizer

from fedmem.audit.config import AuditConfig
from fedmem.audit.pool import MIN_SUFFIX_TOKENS, build_audit_pool
from fedmem.data import (
    ClientSplit,
    FederatedData,
    Record,
    TaskConfig,
    continuation_header,
    format_prompt,
)
from fedmem.data.templates import format_example
from fedmem.engine.config import Decoding, TrainConfig
from fedmem.engine.generation import generate_batched, hit_cap
from fedmem.engine.train import train_local

PREFIX = 12


def words_of(tok, n: int, start: int = 0) -> str:
    """A text of exactly ``n`` tokens under ``tok`` (cut from seeded paragraphs at a token boundary that
    re-encodes to the same length)."""
    ids = tok(" ".join(texts(4, seed=50 + start)), add_special_tokens=False)["input_ids"]
    for cut in range(n, len(ids)):
        text = tok.decode(ids[:cut])
        if len(tok(text, add_special_tokens=False)["input_ids"]) == n:
            return text
    raise AssertionError("no text of that length")


def pool(tok, train_texts: list[str], task: TaskConfig, n: int | str = "all"):
    recs = [Record(id=f"r{i}", user=USER_TEMPLATE.format(text=t), assistant="An answer.", mem_text=t, client=0)
            for i, t in enumerate(train_texts)]
    held = " ".join(texts(2, seed=99))  # a held-out text, never trained on
    test = [Record(id="held", user=USER_TEMPLATE.format(text=held), assistant="An answer.", mem_text=held, client=0)]
    data = FederatedData(clients=[ClientSplit(train=recs, test=test)], public_corpus=[], ground_truth={},
                         source="local")
    audit = AuditConfig(prefix_len=PREFIX, samples_per_client=n, test_per_client=1)
    return build_audit_pool(audit, task, data, tok, seed=0)


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def test_prompt_is_header_and_exactly_the_prefix(tok):
    text = words_of(tok, PREFIX + 40)
    run = pool(tok, [text], TaskConfig(name="dialog"))
    s = run.train[0][0]
    header = continuation_header(tok)
    assert header == "<|im_start|>user\n"  # the tiny preset's ChatML template, user header only
    prompt = tok.decode(list(s.prompt_ids), skip_special_tokens=False)
    assert prompt == header + s.prefix_text  # no instruction text
    assert "<|im_end|>" not in prompt and "assistant" not in prompt  # turn left open, no assistant header
    assert s.prompt_ids[-PREFIX:] == s.prefix_ids  # the prefix's own ids, not re-tokenized
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert list(s.prefix_ids) == ids[:PREFIX] and list(s.suffix_ids) == ids[PREFIX:]  # the suffix: all the rest
    assert s.suffix_text == tok.decode(ids[PREFIX:]) and len(s.suffix_ids) == 40
    # utility still scores answers: its prompt is the whole instruction with the assistant header
    assert tok.decode(list(s.full_prompt_ids), skip_special_tokens=False) == format_prompt(tok, USER_TEMPLATE.format(
        text=text))


def test_plain_task_prompt_is_the_bare_prefix(tok):
    run = pool(tok, [words_of(tok, PREFIX + 25)], TaskConfig(name="text"))
    s = run.train[0][0]
    assert s.prompt_ids == s.prefix_ids and run.prompt_header == ()


def test_length_cut_and_duplicates(tok):
    short, exact, longer = (words_of(tok, PREFIX + MIN_SUFFIX_TOKENS - 1, 1), words_of(tok, PREFIX + MIN_SUFFIX_TOKENS, 2),
                            words_of(tok, PREFIX + 50, 3))
    run = pool(tok, [short, exact, longer, longer, exact], TaskConfig(name="dialog"))
    kept = sorted(len(s.suffix_ids) for s in run.train[0])
    assert kept == [MIN_SUFFIX_TOKENS, 50]  # prefix + 19 dropped, prefix + 20 kept, each duplicate once
    with pytest.raises(ValueError, match=f"at least {PREFIX + MIN_SUFFIX_TOKENS} tokens"):
        pool(tok, [short, exact, longer], TaskConfig(name="dialog"), n=3)


def test_trained_model_continues_the_text_under_the_open_turn(tok, one_torch_thread):
    """Trained as fedmem trains (the whole conversation, instruction + text + answer), a model given the text's
    prefix in the open user turn continues the text; given the old answer-style prompt (the prefix inside the
    instruction, turn closed, assistant header) it answers instead, and the text's continuation never appears."""
    planted = texts(1, seed=7, n_sentences=5)[0]
    others = texts(6, seed=8, n_sentences=5)
    answer = "Thank you for asking. Rest well and drink plenty of water."
    conversations = [format_example(tok, USER_TEMPLATE.format(text=t), answer) for t in [planted] * 6 + others]
    examples = list(tok(conversations, add_special_tokens=False)["input_ids"])
    model = tiny_model(tok, hidden=96, layers=2)
    cfg = TrainConfig(lr=3e-3, batch_size=4, effective_batch=4, progress=False)
    train_local(model, examples, cfg, seed=0, pad_id=tok.pad_token_id, epochs=40)

    run = pool(tok, [planted], TaskConfig(name="dialog"))
    s = run.train[0][0]
    old = tuple(tok(format_prompt(tok, USER_TEMPLATE.format(text=s.prefix_text)), add_special_tokens=False)[
        "input_ids"])
    new_out, old_out = (o[0] for o in generate_batched(model, tok, [s.prompt_ids, old], max_new_tokens=80,
                                                        decoding=Decoding(strategy="greedy")))
    want = list(s.suffix_ids[:MIN_SUFFIX_TOKENS])
    assert new_out[:MIN_SUFFIX_TOKENS] == want  # the open turn: the model continues the client's text
    assert not any(old_out[i : i + 8] == want[:8] for i in range(len(old_out)))  # answer-style: it answers
    assert tok.decode(old_out).startswith("Thank")  # the trained answer begins
    assert not hit_cap(new_out, 80)  # it ends the turn where the text ended in training


def test_prompt_under_a_real_chat_template(smollm2_dir):
    """SmolLM2-135M-Instruct's own template (a default system turn, then the user header): the prompt is that
    header and exactly the prefix, the user turn open, no assistant header."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    text = ("In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
            "darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters.")
    run = pool(tok, [text], TaskConfig(name="dialog"))
    s = run.train[0][0]
    header = continuation_header(tok)
    assert header.startswith("<|im_start|>system\n") and header.endswith("<|im_start|>user\n")
    prompt = tok.decode(list(s.prompt_ids), skip_special_tokens=False)
    assert prompt == header + s.prefix_text and s.prompt_ids[-PREFIX:] == s.prefix_ids
    assert "<|im_start|>assistant" not in prompt and not prompt.rstrip().endswith("<|im_end|>")
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert list(s.suffix_ids) == ids[PREFIX:] and s.suffix_text == tok.decode(ids[PREFIX:])


def test_prior_aware_scores_in_the_prompt_context(tok):
    """With context=prompt, P(s|p) is scored after MR's prompt (the open user turn), and so are the generic
    calibration pairs (the default, the training context, is tested in test_training_context.py)."""
    from fedmem.audit.base import AuditedModel
    from fedmem.audit.prior_aware import PriorAwareConfig, PriorAwareMemorization

    run = pool(tok, [words_of(tok, PREFIX + 40, i) for i in range(3)], TaskConfig(name="dialog"))
    method = PriorAwareMemorization(PriorAwareConfig(n=2, suffix_len=24, c=2, trials=1, context="prompt",
                                                     generic=[words_of(tok, 40, 9)]), run)
    audited = AuditedModel(pool=run, round=1, model=tiny_model(tok))
    method.audit(audited)
    pairs = list(audited._stats_cache)  # the pairs scored, in the order asked
    audited_pairs, generic = pairs[: len(method.audited)], pairs[len(method.audited):]
    assert [p for p, _ in audited_pairs] == [s.prompt_ids for s in method.audited]
    assert [s for _, s in audited_pairs] == [s.suffix_ids[:24] for s in method.audited]  # PA's fixed suffix length
    assert all(p[: len(run.prompt_header)] == run.prompt_header and len(p) > len(run.prompt_header) for p, _ in generic)
