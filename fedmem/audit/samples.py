"""The samples every round audits: chosen once per run, by seed, from each client's train and test splits.

The memorization text of a record (SPEC §2) is tokenized; its first ``prefix_len`` tokens are the prefix and the
next ``suffix_len`` tokens the suffix. Canary records are always included, so the report can score every method
against the planted truth; the rest is a seeded uniform sample, in which boilerplate occurs at its natural rate
(MR samples prefixes uniformly, SPEC §3). A text held several times (a canary's copies) is audited once.
"""

from __future__ import annotations

import random

from fedmem.audit.base import AuditRun, AuditSample
from fedmem.config import AuditConfig
from fedmem.data import format_prompt


def build_audit_run(audit: AuditConfig, task, data, tokenizer, seed: int) -> AuditRun:
    """The run's fixed audit pool (``audit.samples_per_client`` train and ``audit.test_per_client`` test samples
    per client). A client that cannot supply the requested number is an error naming both numbers."""
    rng = random.Random(seed)

    def prepare(rec, client: int, split: str, idx: int) -> AuditSample | None:
        ids = tokenizer(rec.mem_text, add_special_tokens=False)["input_ids"]
        if len(ids) < audit.prefix_len + max(1, audit.suffix_len // 2):
            return None  # too short to hold a prefix and a meaningful suffix
        prefix, suffix = ids[: audit.prefix_len], ids[audit.prefix_len : audit.prefix_len + audit.suffix_len]
        prefix_text, suffix_text = tokenizer.decode(prefix), tokenizer.decode(suffix)
        user = rec.user.replace(rec.mem_text, prefix_text, 1)
        prompt_ids = tuple(tokenizer(format_prompt(tokenizer, user, task.plain), add_special_tokens=False)["input_ids"])
        if task.plain and not rec.assistant:  # running text: utility and PEARL score the prefix's continuation
            reference, full_prompt_ids = suffix_text, prompt_ids
        else:
            reference = rec.assistant
            full_prompt_ids = tuple(tokenizer(format_prompt(tokenizer, rec.user, task.plain),
                                              add_special_tokens=False)["input_ids"])
        return AuditSample(
            id=f"c{client}/{split}/{idx}",
            client=client,
            split=split,
            prompt_ids=prompt_ids,
            prefix_ids=tuple(prefix),
            suffix_ids=tuple(suffix),
            prefix_text=prefix_text,
            suffix_text=suffix_text,
            reference=reference,
            label=rec.label,
            tags={**dict(rec.tags), "record_id": rec.id},
            full_prompt_ids=full_prompt_ids,
        )

    def pick(records, n: int | str, client: int, split: str, key: str) -> list[AuditSample]:
        seen, canaries, rest = set(), [], []
        for i, r in enumerate(records):
            if r.mem_text in seen:
                continue
            seen.add(r.mem_text)
            (canaries if split == "train" and "canary" in r.tags else rest).append(i)
        rng.shuffle(rest)
        want = len(canaries) + len(rest) if n == "all" else max(n, len(canaries))
        out = []
        for i in canaries + rest:
            if len(out) >= want:
                break
            s = prepare(records[i], client, split, i)
            if s is not None:
                out.append(s)
        if n != "all" and len(out) < n:
            raise ValueError(
                f"{key}={n}, but client {client}'s {split} split has only {len(out)} distinct samples of at least "
                f"{audit.prefix_len + max(1, audit.suffix_len // 2)} tokens (audit.prefix_len plus half of "
                f"audit.suffix_len): lower {key} or set it to all"
            )
        return out

    train = {c: pick(cs.train, audit.samples_per_client, c, "train", "audit.samples_per_client")
             for c, cs in enumerate(data.clients)}
    test = {c: pick(cs.test, audit.test_per_client, c, "test", "audit.test_per_client")
            for c, cs in enumerate(data.clients)}
    return AuditRun(
        train=train,
        test=test,
        train_sizes={c: len(cs.train) for c, cs in enumerate(data.clients)},
        tokenizer=tokenizer,
        decoding=audit.decoding,
        prefix_len=audit.prefix_len,
        suffix_len=audit.suffix_len,
        seed=seed,
        task=task.name,
        ground_truth=data.ground_truth,
        reveal_text=audit.reveal_text,
        task_config=task,
        public_texts=tuple(data.public_corpus),
    )


def check_supply(run: AuditRun, needs: dict[str, dict[str, int]]) -> None:
    """Every method's per-client sample needs (``{method: {split: n}}``) against what the pool holds."""
    for name, need in needs.items():
        for split, n in need.items():
            pool = run.train if split == "train" else run.test
            for client, samples in pool.items():
                if len(samples) < n:
                    raise ValueError(f"audit.{name} audits {n} {split} samples per client, but client {client} "
                                     f"supplies {len(samples)}: lower audit.{name}'s size")
