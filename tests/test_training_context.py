"""Scoring in the context the model was trained in (SPEC §6): the training-context form of every audit sample is a
literal slice of the ids training feeds the model, and Prior-Aware, the membership attacks and PEARL score there by
default and in MR's prompt context with ``context: prompt``."""

from __future__ import annotations

import copy

import pytest
from helpers import USER_TEMPLATE, texts, tiny_model, tiny_tokenizer

from fedmem.audit.base import AuditedModel, AuditPool, build_method_config
from fedmem.audit.config import AuditConfig
from fedmem.audit.mia import MembershipInference
from fedmem.audit.pearl import PearlSensitivity
from fedmem.audit.pool import build_audit_pool, header_ids, text_sample
from fedmem.audit.prior_aware import PriorAwareMemorization
from fedmem.data import ClientSplit, FederatedData, Record, TaskConfig
from fedmem.data.templates import format_example
from fedmem.engine.config import Decoding
from fedmem.engine.train import tokenize_examples

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PREFIX = 12
INSTRUCTION = USER_TEMPLATE.split("{")[0].strip()  # "Please continue the following text."
# starts with a lowercase word: in the training sequence it follows a space, and the tiny tokenizer has a token for
# " patient" that the text tokenized alone ("patient") does not use
LOWERCASE_TEXT = "patient " + texts(1, seed=77)[0]


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def no_template(tok):
    """The same tokenizer without a chat template: training renders "User: ...\\nAssistant: ..." (the fallback)."""
    plain = copy.deepcopy(tok)
    plain.chat_template = None
    return plain


def records(split: str, n: int, seed: int) -> list[Record]:
    bodies = ([LOWERCASE_TEXT] if split == "train" else []) + texts(n, seed=seed)
    return [Record(id=f"{split}{i}", user=USER_TEMPLATE.format(text=t), assistant="An answer.", mem_text=t, client=0)
            for i, t in enumerate(bodies[:n])]


def pool(tokenizer, task: TaskConfig, n_train: int = 4, n_test: int = 3) -> tuple[AuditPool, dict[str, Record]]:
    """(the audit run over one client's records, the records by sample id)."""
    train, test = records("train", n_train, seed=31), records("test", n_test, seed=32)
    data = FederatedData(clients=[ClientSplit(train=train, test=test)], public_corpus=[], ground_truth={},
                         source="local")
    audit = AuditConfig(prefix_len=PREFIX, samples_per_client="all", test_per_client="all")
    run = build_audit_pool(audit, task, data, tokenizer, seed=0)
    by_id = {r.id: r for r in train + test}
    return run, {s.id: by_id[s.tags["record_id"]] for pool in (run.train, run.test) for s in pool[0]}


def all_samples(run: AuditPool):
    return [s for pool in (run.train, run.test) for c in run.clients for s in pool[c]]


# ---------------------------------------------------------------- the training-context form


@pytest.mark.parametrize("case", ["chat", "plain", "no_template"])
def test_training_form_is_a_slice_of_the_trained_ids(case, tok, no_template):
    """Context + suffix are the first ids of tokenize_examples' output for the record, decode to exactly the
    rendered training text up to the end of the memorization text, and the context holds the instruction and
    exactly prefix_len tokens of the memorization text."""
    tokenizer = no_template if case == "no_template" else tok
    plain = case == "plain"
    run, recs = pool(tokenizer, TaskConfig(name="dialog", format="plain" if plain else "chat"))
    for s in all_samples(run):
        rec = recs[s.id]
        trained = tokenize_examples([rec], tokenizer, plain)[0]
        scored = s.train_context_ids + s.train_suffix_ids
        assert tuple(trained[: len(scored)]) == scored
        rendered = format_example(tokenizer, rec.user, rec.assistant, plain)
        mem_end = rendered.index(rec.mem_text) + len(rec.mem_text)
        assert tokenizer.decode(list(scored), skip_special_tokens=False) == rendered[:mem_end]
        context = tokenizer.decode(list(s.train_context_ids), skip_special_tokens=False)
        assert INSTRUCTION in context and context.endswith(s.train_prefix_text)
        assert rec.mem_text.startswith(s.train_prefix_text) and s.train_prefix_text
        # exactly prefix_len of the memorization text's tokens end the context: the tokens before them end where
        # the text starts (or before the space that its first trained token holds), the first of them reaches into it
        mem_start = rendered.index(rec.mem_text)
        head = tokenizer.decode(list(s.train_context_ids[:-PREFIX]), skip_special_tokens=False)
        first = tokenizer.decode(list(s.train_context_ids[: -PREFIX + 1]), skip_special_tokens=False)
        assert rendered[:mem_start].startswith(head) and len(first) > mem_start
    # the prompt context is different: no instruction (and after the chat header, or bare, for plain text)
    s = run.train[0][0]
    assert INSTRUCTION not in tokenizer.decode(list(s.prompt_ids), skip_special_tokens=False)
    assert run.train_frame is not None and INSTRUCTION in run.train_frame.before


def test_trained_tokens_of_the_text_are_used_not_its_own_tokenization(tok):
    """Where the text's first word merges with the space before it in training, the training form takes the
    trained tokens, not those of the text tokenized alone: the tiny tokenizer splits "patient" alone but has one
    token for " patient", so the trained prefix of the same length covers more of the text."""
    run, recs = pool(tok, TaskConfig(name="dialog"))
    s = next(s for s in run.train[0] if recs[s.id].mem_text == LOWERCASE_TEXT)
    trained_prefix = s.train_context_ids[-PREFIX:]
    assert tok.decode(list(trained_prefix)) == " " + s.train_prefix_text
    assert trained_prefix[0] == tok(" patient", add_special_tokens=False)["input_ids"][0]
    assert s.prefix_ids[0] != trained_prefix[0] and s.prefix_text != s.train_prefix_text
    assert s.train_prefix_text.startswith(s.prefix_text)


def test_a_sample_not_built_from_a_record_cannot_be_scored_in_the_training_context(tok):
    ids = tok(texts(1, seed=5)[0], add_special_tokens=False)["input_ids"]
    sample = text_sample(tok, ids, header_ids(tok), PREFIX, 0, "train", 0, 40)
    run = AuditPool(train={0: [sample]}, test={0: []}, train_sizes={0: 1}, tokenizer=tok, decoding=Decoding(),
                   prefix_len=PREFIX, prompt_header=header_ids(tok), seed=0)
    with pytest.raises(ValueError, match=r"audit\.pa\.context=train .* set audit\.pa\.context=prompt"):
        PriorAwareMemorization(build_method_config("pa", {"n": 1, "suffix_len": 8, "n_ratio": 2.0}), run)
    method = PriorAwareMemorization(build_method_config("pa", {"n": 1, "suffix_len": 8, "n_ratio": 2.0,
                                                               "context": "prompt"}), run)
    assert method.context == "prompt"


@pytest.mark.parametrize("name", ["pa", "mia", "pearl"])
def test_a_bad_context_fails_with_one_message_naming_the_key(name):
    with pytest.raises(ValueError, match=rf"^audit\.{name}\.context must be one of train, prompt, got 'training'$"):
        build_method_config(name, {"context": "training"})
    assert build_method_config(name, {}).context == "train"


# ---------------------------------------------------------------- what the methods score


@pytest.fixture(scope="module")
def chat_run(tok):
    run = pool(tok, TaskConfig(name="dialog"), n_train=4, n_test=3)[0]
    # the two contexts differ for every sample (the instruction), so checking what was scored tells them apart
    assert all(s.scored_in("train")[0] != s.scored_in("prompt")[0] for s in all_samples(run))
    return run


@pytest.fixture(scope="module")
def model(tok):
    return tiny_model(tok)


def scored_pairs(audited: AuditedModel) -> list:
    """The (context, suffix) pairs the round scored teacher-forced, in the order asked."""
    return list(audited._stats_cache)


def expected(samples, context: str, suffix_len: int | None = None) -> list:
    out = []
    for s in samples:
        p, sfx = s.scored_in(context)
        out.append((tuple(p), tuple(sfx[:suffix_len])))
    return out


@pytest.mark.parametrize("context", ["train", "prompt"])
def test_prior_aware_scores_p_the_prior_and_the_generic_pairs_in_one_context(context, chat_run, tok, model):
    settings = {"n": 3, "suffix_len": 16, "c": 4, "trials": 1, "generic": [texts(1, seed=9)[0]]}
    cfg = build_method_config("pa", settings if context == "train" else {**settings, "context": context})
    method = PriorAwareMemorization(cfg, chat_run)
    audited = AuditedModel(pool=chat_run, round=1, model=model)
    section = method.audit(audited)
    assert section["context"] == context and section["config"]["context"] == context
    pairs = scored_pairs(audited)
    audited_pairs, generic = pairs[: len(method.audited)], pairs[len(method.audited):]
    assert audited_pairs == expected(method.audited, context, 16)
    contexts = {s.scored_in(context)[0] for s in chat_run.train[0]}
    (prefixes, _), = audited._prior_cache  # the prior's P(s|q_i): every q_i is a pool sample's context
    assert set(prefixes) <= contexts
    generic_context = tok.decode(list(generic[0][0]), skip_special_tokens=False)
    if context == "train":
        # the generic sentence stands where a record's memorization text stands in training: after the instruction
        assert generic_context.startswith(chat_run.train_frame.before)
        assert all(INSTRUCTION in tok.decode(list(p), skip_special_tokens=False) for p in prefixes)
    else:
        assert INSTRUCTION not in generic_context and generic[0][0][: len(chat_run.prompt_header)] == \
            chat_run.prompt_header
        assert not any(INSTRUCTION in tok.decode(list(p), skip_special_tokens=False) for p in prefixes)


def test_prior_aware_audits_the_same_samples_in_both_contexts(chat_run):
    ids = {c: [s.id for s in PriorAwareMemorization(build_method_config("pa", {"n": 3, "suffix_len": 16, "c": 4,
                                                                               "context": c}), chat_run).audited]
           for c in ("train", "prompt")}
    assert ids["train"] == ids["prompt"]


@pytest.mark.parametrize("context", ["train", "prompt"])
def test_membership_attacks_score_the_suffix_in_the_chosen_context(context, chat_run, model):
    settings = {"n": 2, "suffix_len": 16, "resamples": 20}
    cfg = build_method_config("mia", settings if context == "train" else {**settings, "context": context})
    method = MembershipInference(cfg, chat_run)
    audited = AuditedModel(pool=chat_run, round=1, model=model)
    section = method.audit(audited)
    assert section["context"] == context and section["config"]["context"] == context
    assert scored_pairs(audited) == expected(method.samples, context, 16)
    assert {s.split for s in method.samples} == {"train", "test"}  # members and non-members alike


@pytest.mark.parametrize("context", ["train", "prompt"])
def test_pearl_perturbs_and_continues_the_prefix_in_the_chosen_context(context, chat_run, tok, model):
    settings = {"n": 2, "nonmembers": 2, "intensities": [0, 5], "samples_per_intensity": 1, "max_new_tokens": 4}
    cfg = build_method_config("pearl", settings if context == "train" else {**settings, "context": context})
    method = PearlSensitivity(cfg, chat_run)
    audited = AuditedModel(pool=chat_run, round=1, model=model)
    section = method.audit(audited)
    assert section["context"] == context
    (prompts, *_), = audited._gen_cache  # the one generation request
    for i, s in enumerate(method.samples):
        own, perturbed = prompts[2 * i], prompts[2 * i + 1]
        context_ids = s.scored_in(context)[0]
        assert own == tuple(context_ids)
        # the perturbed prompt keeps the context up to the prefix, and changes the prefix only
        head = tok.decode(list(context_ids), skip_special_tokens=False)[: -len(s.prefix_text_in(context))]
        text = tok.decode(list(perturbed), skip_special_tokens=False)
        assert text.startswith(head) and text != head + s.prefix_text_in(context)
        assert (INSTRUCTION in head) == (context == "train")
    # outputs are scored against the suffix in the same context; the loss attack scores it there too
    assert method.references == [tok.decode(list(s.scored_in(context)[1][:4])) for s in method.samples]
    assert scored_pairs(audited) == expected(method.samples, context)
