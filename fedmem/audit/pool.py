"""The samples every round audits: drawn once per run, by seed, from each client's train and test splits.

As the cross-client paper's code samples them (SPEC §3): per client, duplicate memorization texts are dropped,
texts shorter than ``prefix_len`` + 20 tokens are dropped, and the rest is drawn without replacement. The
memorization text (SPEC §2) is tokenized; its first ``prefix_len`` tokens are the prefix and **all the rest** is
the suffix. The same records give a client's prefixes and the suffixes in its index. On the synthetic source the
planted canaries are always included, so every method can be scored against the planted truth; the rest is the
seeded draw, in which boilerplate occurs at its natural rate. Each client's common draw, the ordinary samples every
method audits and the methods' agreement is measured on, comes right after the canaries (:func:`place_common_draw`).

Each sample also carries its prefix and suffix as trained (SPEC §6): slices of its record's ids as training renders
and tokenizes it (``fedmem.audit.training_context``), for the methods that score in the training context.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from fedmem.audit.base import AuditPool, AuditSample
from fedmem.audit.config import AuditConfig
from fedmem.audit.training_context import TrainingForm, TrainingFrame, has_offsets
from fedmem.data import continuation_header, format_prompt
from fedmem.data.audit_canaries import TAG as AUDIT_CANARY
from fedmem.data.dedup import TrainedText

# The seed code keeps a text when it has at least prefix_len + 20 tokens, so every suffix has 20 tokens or more.
MIN_SUFFIX_TOKENS = 20


def header_ids(tokenizer, plain: bool = False) -> tuple[int, ...]:
    """The ids every audit prompt starts with: the chat template's open user turn (none for a plain task or a
    tokenizer without a template)."""
    header = "" if plain else continuation_header(tokenizer)
    return tuple(tokenizer(header, add_special_tokens=False)["input_ids"]) if header else ()


def text_sample(tokenizer, ids: list[int], header: tuple[int, ...], prefix_len: int, client: int, split: str,
                idx: int, suffix_len: int | None = None, tags: dict | None = None) -> AuditSample:
    """The audit sample of one tokenized text: its first ``prefix_len`` tokens the prefix, the rest (or the next
    ``suffix_len``) the suffix, the prompt ``header`` + the prefix; utility's reference is the suffix's text."""
    prefix, suffix = ids[:prefix_len], ids[prefix_len : None if suffix_len is None else prefix_len + suffix_len]
    suffix_text = tokenizer.decode(suffix)
    return AuditSample(id=f"c{client}/{split}/{idx}", client=client, split=split, prompt_ids=header + tuple(prefix),
                       prefix_ids=tuple(prefix), suffix_ids=tuple(suffix), prefix_text=tokenizer.decode(prefix),
                       suffix_text=suffix_text, reference=suffix_text, tags=dict(tags or {}),
                       full_prompt_ids=header + tuple(prefix))


def with_training_form(sample: AuditSample, form: TrainingForm, trained_len: int | None = None) -> AuditSample:
    """``sample`` carrying its training-context form, cut where training cut the record (its first ``trained_len``
    ids, ``model.max_seq_len``; None: nothing cut): the suffix keeps only the tokens training saw, and a sample whose
    prefix itself was cut keeps none (``train_cut`` counts what went, SPEC §6)."""
    context, suffix, cut = form.context_ids, form.suffix_ids, 0
    if trained_len is not None and len(context) + len(suffix) > trained_len:
        kept = max(0, trained_len - len(context))
        cut = len(sample.suffix_ids) if kept == 0 else len(suffix) - kept
        suffix = suffix[:kept]
    return replace(sample, train_context_ids=context, train_suffix_ids=suffix, train_prefix_text=form.prefix_text,
                   train_cut=cut)


def _prepare(tokenizer, task, prefix_len: int, header: tuple[int, ...], frames: dict[str, TrainingFrame],
             trained_len: int | None, rec, client: int, split: str, idx: int) -> AuditSample | None:
    """The audit sample of one record, its training frame noted in ``frames``; None when its text is too short."""
    ids = tokenizer(rec.mem_text, add_special_tokens=False)["input_ids"]
    if len(ids) < prefix_len + MIN_SUFFIX_TOKENS:
        return None
    sample = text_sample(tokenizer, ids, header, prefix_len, client, split, idx,
                         tags={**dict(rec.tags), "record_id": rec.id})
    # the sample as trained (SPEC §6); a tokenizer without character offsets cannot locate it in the trained ids
    frame = TrainingFrame.of(tokenizer, rec, task.plain) if has_offsets(tokenizer) else None
    if frame is not None:
        frames[sample.id] = frame
        sample = with_training_form(sample, frame.form(tokenizer, rec.mem_text, prefix_len), trained_len)
    if task.plain and not rec.assistant:  # running text: utility scores the prefix's continuation
        return replace(sample, label=rec.label)
    # utility scores the answer to the whole instruction, as trained
    prompt = tokenizer(format_prompt(tokenizer, rec.user, task.plain), add_special_tokens=False)["input_ids"]
    return replace(sample, reference=rec.assistant, label=rec.label, full_prompt_ids=tuple(prompt))


def _pick(records, n: int | str, client: int, split: str, key: str, rng: random.Random, min_tokens: int,
          prepare: Callable[..., AuditSample | None], elsewhere: set[str]) -> list[AuditSample]:
    """One client split's samples: its distinct texts, the planted canaries (train) first, then a seeded draw of n
    ordinary ones; ``elsewhere``: its ordinary texts found in training text beyond the record itself (another
    client's training split or the public share; for a held-out text, any), never drawn."""
    seen, planted, rest = set(), [], []
    for i, r in enumerate(records):
        if r.mem_text in seen or AUDIT_CANARY in r.tags:
            continue  # an audit canary is the privacy audit's own sample (fedmem.audit.one_run), never an ordinary one
        seen.add(r.mem_text)
        if split == "train" and "canary" in r.tags:
            planted.append(i)
        elif r.mem_text not in elsewhere:
            rest.append(i)
    rng.shuffle(rest)  # taking the first usable ones of a shuffled list = drawing without replacement
    want = len(rest) if n == "all" else n
    out = [s for s in (prepare(records[i], client, split, i) for i in planted) if s is not None]
    ordinary = 0
    for i in rest:
        if ordinary >= want:
            break
        s = prepare(records[i], client, split, i)
        if s is not None:
            out.append(s)
            ordinary += 1
    if n != "all" and ordinary < n:
        raise ValueError(
            f"{key}={n}, but client {client}'s {split} split has only {ordinary} distinct samples of at least "
            f"{min_tokens} tokens (audit.prefix_len plus {MIN_SUFFIX_TOKENS}) that are not training text elsewhere: "
            f"lower {key} or set it to all"
        )
    return out


def left_out(records, split: str, tokenizer, min_tokens: int, elsewhere: set[str]) -> dict[str, int]:
    """What of one client split the audit pool never draws, by reason, over every record of the split (not only those
    a draw reached): ``duplicate``, a repeat of a text earlier in the split; ``trained_elsewhere``, a text found in
    training text beyond its record (the split's ``elsewhere``); ``too_short``, fewer than ``min_tokens`` tokens.
    The privacy audit's own canaries and the planted ones are not ordinary samples and are not counted."""
    seen, candidates, counts = set(), [], {"duplicate": 0, "trained_elsewhere": 0, "too_short": 0}
    for r in records:
        if AUDIT_CANARY in r.tags or (split == "train" and "canary" in r.tags):
            continue
        if r.mem_text in seen:
            counts["duplicate"] += 1
            continue
        seen.add(r.mem_text)
        if r.mem_text in elsewhere:
            counts["trained_elsewhere"] += 1
        else:
            candidates.append(r.mem_text)
    if candidates:
        lengths = map(len, tokenizer(candidates, add_special_tokens=False)["input_ids"])
        counts["too_short"] = sum(n < min_tokens for n in lengths)
    return counts


def build_audit_pool(audit: AuditConfig, task, data, tokenizer, seed: int, trained_len: int | None = None) -> AuditPool:
    """The run's fixed audit pool: per client the planted canaries and ``audit.samples_per_client`` ordinary train
    samples, and ``audit.test_per_client`` test samples that are not training text (SPEC §3b: a held-out text whose
    normalized text, or under near dedup a near-duplicate, is in any client's training split or the public share is
    left out, and counted). ``trained_len``: where training cuts a record (``model.max_seq_len``; None: nowhere). A
    client that cannot supply the requested number is an error naming both numbers."""
    rng = random.Random(seed)
    header = header_ids(tokenizer, task.plain)
    min_tokens = audit.prefix_len + MIN_SUFFIX_TOKENS
    frames: dict[str, TrainingFrame] = {}  # sample id -> its record's training frame
    prepare = partial(_prepare, tokenizer, task, audit.prefix_len, header, frames, trained_len)
    training_texts = {c: tuple(r.mem_text for r in cs.train) for c, cs in enumerate(data.clients)}
    dedup = data.ground_truth.get("dedup") or {}
    threshold = dedup["threshold"] if dedup.get("mode") == "near" else None

    def trained_beyond(client: int | None) -> TrainedText:
        """Training text beyond ``client``'s own split (None: all of it), and the public share."""
        return TrainedText([t for c, texts in training_texts.items() if c != client for t in texts]
                           + list(data.public_corpus), threshold)

    # one duplicate rule for both arms (SPEC §3b): a text found in training text beyond its own record is drawn in
    # neither, a held-out one anywhere in it, a training one in another client's split or the public share
    trained = trained_beyond(None)
    heldout_trained = {c: {r.mem_text for r in cs.test if r.mem_text in trained} for c, cs in enumerate(data.clients)}
    train_elsewhere = {}
    for c, cs in enumerate(data.clients):
        beyond = trained_beyond(c) if len(data.clients) > 1 or data.public_corpus else set()
        train_elsewhere[c] = {r.mem_text for r in cs.train if "canary" not in r.tags and r.mem_text in beyond}

    train = {c: _pick(cs.train, audit.samples_per_client, c, "train", "audit.samples_per_client", rng, min_tokens,
                      prepare, train_elsewhere[c])
             for c, cs in enumerate(data.clients)}
    test = {c: _pick(cs.test, audit.test_per_client, c, "test", "audit.test_per_client", rng, min_tokens, prepare,
                     heldout_trained[c])
            for c, cs in enumerate(data.clients)}
    pools = {"train": train, "test": test}
    return AuditPool(
        train=train,
        test=test,
        train_sizes={c: len(cs.train) for c, cs in enumerate(data.clients)},
        tokenizer=tokenizer,
        decoding=audit.decoding,
        prefix_len=audit.prefix_len,
        prompt_header=header,
        seed=seed,
        ground_truth=data.ground_truth,
        reveal_text=audit.reveal_text,
        task_config=task,
        public_texts=tuple(data.public_corpus),
        train_frame=next((frames[s.id] for c in sorted(train) for s in train[c] if s.id in frames), None),
        training_texts=training_texts,
        heldout_trained={c: len(texts) for c, texts in heldout_trained.items()},
        train_elsewhere={c: len(texts) for c, texts in train_elsewhere.items()},
        cut_at_trained_length={c: {split: sum(s.train_cut > 0 for s in drawn[c]) for split, drawn in pools.items()}
                               for c in train},
        left_out={c: {"train": left_out(cs.train, "train", tokenizer, min_tokens, train_elsewhere[c]),
                      "test": left_out(cs.test, "test", tokenizer, min_tokens, heldout_trained[c])}
                  for c, cs in enumerate(data.clients)},
    )


def draw(samples: list[AuditSample], n: int, min_suffix: int = 0) -> tuple[list[AuditSample], int]:
    """(the draw, the samples passed over for a short suffix) of one client's pool, for a method whose rates must
    describe the data: the first n samples in the pool's seeded order with at least ``min_suffix`` suffix tokens that
    training saw, canaries left out (the pool always holds them; a rate over planted, repeated secrets would describe
    them)."""
    out, short = [], 0
    for s in samples:
        if "canary" in s.tags or len(out) >= n:
            continue
        if s.trained_suffix_len >= min_suffix:
            out.append(s)
        else:
            short += 1
    return out, short


def is_canary(s: AuditSample) -> bool:
    return "canary" in s.tags


def draw_and_planted(samples: list[AuditSample], n: int, min_suffix: int = 0, planted=is_canary
                     ) -> tuple[list[AuditSample], list[AuditSample], int]:
    """(the draw, the planted samples beside it, the samples passed over for a short suffix) of one client's pool:
    :func:`draw`'s n ordinary samples for the rates, then every ``planted`` sample (canaries by default) with at
    least ``min_suffix`` trained suffix tokens that the draw did not take, audited for the ground truth only."""
    drawn, short = draw(samples, n, min_suffix)
    taken = {s.id for s in drawn}
    return drawn, [s for s in samples if planted(s) and s.trained_suffix_len >= min_suffix and s.id not in taken], short


def canaries(samples: list[AuditSample]) -> list[AuditSample]:
    """The planted canaries of one client's pool (audited apart from its ordinary samples)."""
    return [s for s in samples if is_canary(s)]


def check_supply(pool: AuditPool, needs: dict[str, dict[str, int]]) -> None:
    """Every method's per-client sample needs (``{method: {split: n}}``, ordinary samples) against what the pool
    holds."""
    for name, need in needs.items():
        for split, n in need.items():
            for client, samples in (pool.train if split == "train" else pool.test).items():
                have = len(samples) - len(canaries(samples))
                if have < n:
                    raise ValueError(f"audit.{name} audits {n} {split} samples per client, but client {client} "
                                     f"supplies {have}: lower audit.{name}'s size")


def front_loaded(samples: list[AuditSample], n: int, min_suffix: int) -> tuple[list[AuditSample], list[AuditSample]]:
    """(the first ``n`` ordinary samples of a split's seeded order with at least ``min_suffix`` trained suffix
    tokens, the split reordered with them just after its canaries): the one selection rule of both arms of every
    comparison of trained with held-out text (SPEC §3b: the arms drawn alike, length included)."""
    chosen, _ = draw(samples, n, min_suffix)
    ids = {s.id for s in chosen}
    return chosen, canaries(samples) + chosen + [s for s in samples if "canary" not in s.tags and s.id not in ids]


def place_common_draw(pool: AuditPool, n: int, min_suffix: int, suffix_owner: str = "") -> AuditPool:
    """The pool with each client's common draw, the first ``n`` ordinary (non-canary) train samples of its seeded
    order with at least ``min_suffix`` suffix tokens (what every enabled method can score), moved to just after the
    canaries, its ids in ``run.common_draw``; and each client's held-out samples reordered by the same rule, so that a
    method's two arms, each drawn as the first samples of its split's order, are drawn alike.

    Why it is moved: a method's draw takes the first samples of the pool's order that it can score, so with the
    common draw at the front any draw of at least ``n`` samples (MR's slice, after the canaries) holds it, whatever
    suffix length the method asks for. A method that scores suffixes of ``min_suffix`` tokens draws exactly what it
    drew before; one that scores shorter suffixes may now take a long-suffix sample in place of a short one.
    ``suffix_owner`` names the method whose suffix sets ``min_suffix``, for the error when a client falls short."""
    train, test, common = {}, {}, {}
    whose = f" ({suffix_owner}'s suffix)" if suffix_owner else ""
    for client, samples in pool.train.items():
        chosen, train[client] = front_loaded(samples, n, min_suffix)
        held, test[client] = front_loaded(pool.test.get(client, []), n, min_suffix)
        if len(chosen) < n or (pool.test.get(client) and len(held) < n):
            split, key, have = ("train", "audit.samples_per_client", len(chosen)) if len(chosen) < n else \
                ("held-out", "audit.test_per_client", len(held))
            raise ValueError(f"audit.common_draw={n}, but client {client}'s pool holds only {have} ordinary {split} "
                             f"samples with {min_suffix} suffix tokens{whose}, and both arms are drawn alike: lower "
                             f"audit.common_draw or raise {key}")
        common[client] = tuple(s.id for s in chosen)
    return replace(pool, train=train, test=test, common_draw=common)


def check_common_draw(pool: AuditPool, audited: dict[str, set[str]], sizes: dict[str, str]) -> None:
    """Every method's audited train ids (``{method: ids}``, ``AuditMethod.audited_train``) against the common draw:
    a method that leaves out part of a client's common draw is an error naming its size (``sizes[method]``, such as
    ``audit.pa.n=16``)."""
    for name, ids in audited.items():
        for client, common in pool.common_draw.items():
            missing = [i for i in common if i not in ids]
            if missing:
                raise ValueError(f"audit.common_draw={len(common)}: every method audits each client's common draw, "
                                 f"but {sizes[name]} leaves out {len(missing)} of client {client}'s: raise "
                                 f"{sizes[name].partition('=')[0]} or lower audit.common_draw")
