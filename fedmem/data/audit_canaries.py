"""Audit canaries and canary clients: what the data plants for the privacy audits of docs/spec.md §10.

**Audit canaries** (``data.audit_canaries``, Steinke, Nasr and Jagielski's one-run audit). m canaries are drawn once
per run, each an independent draw of ``data.audit_canary_words`` words, uniformly and with replacement, from the
data's vocabulary (the words of its public corpus and of the clients' training texts): no canary says
anything about another, or about any record, so the ones trained on and the ones held out are exchangeable before
training. Each is a member with probability 1/2, by a coin of its own, and every canary is given a client uniformly
at random; a member's ``data.audit_canary_copies`` copies go into that client's training split, at seeded random
places, rendered as a record of the task (the canary as the memorization text, every other field empty). A non-member
is never trained on by anyone. Inserted before deduplication: a defense acts on them as on any record.

Including or leaving out one canary changes one client's data only, which client-level DP covers (docs/spec.md §9),
so the audit's bound is one on the run's own ε whatever the number of copies.

**Canary clients** (``data.audit_canary_clients``, Andrew et al.'s one-shot estimate): clients that hold no records.
Their partitions follow the real clients' (``data.num_clients`` .. ``+ data.audit_canary_clients - 1``); what they send
is the federation's business (``fedmem.federation.canary_clients``).

Both go into the data's ground truth (``audit_canaries``, ``canary_clients``), which the audits read.
"""

from __future__ import annotations

import dataclasses
import re

from fedmem.data.records import FederatedData, Record
from fedmem.data.seeding import rng_for
from fedmem.data.templates import render_record

TAG = "audit_canary"  # a record's tag naming the audit canary it is a copy of
MIN_VOCABULARY = 10  # fewer distinct words and the canaries would be much of one another's text
WORD = re.compile(r"[A-Za-z]{3,}")


def vocabulary(fd: FederatedData) -> list[str]:
    """The words canaries are drawn from: those of the public corpus and the clients' training texts (lower-cased,
    alphabetic, 3 letters or more), sorted, so that the draw depends on the seed only."""
    texts = [*fd.public_corpus, *(r.mem_text for c in fd.clients for r in c.train)]
    return sorted({w.lower() for t in texts for w in WORD.findall(t)})


def canary_record(task, canary: str, text: str, copy: int, client: int) -> Record:
    """One copy of an audit canary as a record of ``task``: the canary is the memorization text, every other field of
    the task's templates is empty."""
    fields = {name: "" for name in task.fields} | {task.mem_field: text}
    return render_record(task.user_template, task.assistant_template, task.mem_field, fields,
                         f"{canary}-copy{copy:02d}", client=client, tags={TAG: canary})


def plant(fd: FederatedData, task, data, seed: int) -> FederatedData:
    """``fd`` with ``data``'s audit canaries in its clients' training splits and both kinds of canary in its ground
    truth (nothing planted, and no ground truth added, when ``data`` asks for neither)."""
    truth = dict(fd.ground_truth)
    if data.audit_canary_clients:
        k = data.audit_canary_clients
        truth["canary_clients"] = {"count": k, "partitions": list(range(fd.num_clients, fd.num_clients + k))}
    if not data.audit_canaries:
        return dataclasses.replace(fd, ground_truth=truth)
    words = vocabulary(fd)
    if len(words) < MIN_VOCABULARY:
        raise ValueError(f"data.audit_canaries={data.audit_canaries}: the data has only {len(words)} distinct words to "
                         f"draw canaries from (at least {MIN_VOCABULARY}); set data.audit_canaries=0")
    rng = rng_for(seed, "audit-canaries")
    known = {r.mem_text for _, _, r in fd.all_records()}
    train = [list(c.train) for c in fd.clients]
    canaries = []
    for i in range(data.audit_canaries):
        text = " ".join(rng.choice(words) for _ in range(data.audit_canary_words))
        while text in known:  # never in practice: the draw has len(words) ** words outcomes
            text = " ".join(rng.choice(words) for _ in range(data.audit_canary_words))
        known.add(text)
        member, client = rng.random() < 0.5, rng.randrange(fd.num_clients)  # for every canary, member or not
        name = f"ac{i:04d}"
        records = [canary_record(task, name, text, k, client) for k in range(data.audit_canary_copies if member else 0)]
        for r in records:
            train[client].insert(rng.randrange(len(train[client]) + 1), r)
        canaries.append({"id": name, "text": text, "member": member, "client": client,
                         "record_ids": [r.id for r in records]})
    truth["clients"] = [{**entry, "train_ids": [r.id for r in train[entry["client"]]]} if "train_ids" in entry
                        else entry for entry in truth.get("clients", [])]  # the ground truth lists every record
    truth["audit_canaries"] = {"count": data.audit_canaries, "copies": data.audit_canary_copies,
                               "words": data.audit_canary_words, "vocabulary": len(words),
                               "members": sum(k["member"] for k in canaries), "canaries": canaries}
    clients = [dataclasses.replace(c, train=t) for c, t in zip(fd.clients, train)]
    return dataclasses.replace(fd, clients=clients, ground_truth=truth)
