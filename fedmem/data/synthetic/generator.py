"""The seeded synthetic source: clinical dialogs from distinct specialties, with known ground truth (SPEC §7).

What it plants, and why:

- **Client domains.** Client j's patients come from ``data.specialties[j]`` (cardiology, dermatology,
  gastroenterology, ... cycled when there are more clients), so intra-client text is more alike than
  inter-client text: in topic and vocabulary (each specialty's symptoms, body sites, triggers, medicines, tests,
  readings, family conditions and worries), not in shared sentences. With ``task.partition`` iid or dirichlet the
  specialty pools are pooled and re-split (Dirichlet over the specialty), for non-natural baselines.
- **Distinctive ordinary records.** An ordinary patient text is an opening (greeting, age, job, town, the main
  symptom and since when) and two long sentences telling four facets of one story (onset, character, triggers,
  medicine, tests, family history, habits, routine, work, associated complaints, impact, worries, visits), from
  the grammar in :mod:`story`: frames of few fixed words around many independent slots, each drawn from a list of
  its own, with dates, doses and readings of the patient's own. Two records rarely share a third of a sentence's
  words or a 50-character run of words, so a fresh text of the same generator does not match a client's training
  suffixes under MR's retrieval and detector: a model that reproduces a record has memorized it, not learned a
  template. No memorization text occurs twice (canary copies aside) and none occurs in the public corpus. The
  doctor's answer quotes the patient's last sentence verbatim.
- **Generic boilerplate.** ``num_boilerplates`` closing paragraphs are shared by all clients: a fraction
  ``generic_fraction`` of the samples (train and test, every client, boilerplates assigned round-robin) is a
  varied opening of at least 26 words (so the boilerplate starts after the 30-token audit prefix) followed by
  one of them. The default share is 5%: in real patient questions a pasted stock paragraph is the exception
  (most write their own closing), yet 5% still puts about 30 boilerplate records in a client's 600 audited
  suffixes. The public corpus contains them too, after many other openings, so a base model already predicts them
  whatever the prefix: extractable, not Prior-Aware memorized. Such a record matches every client by design.
  Tag: ``{"generic": True, "boilerplate": "bp<k>"}``.
- **Canaries.** For every copy count in ``canary_copies`` and every canary client, ``canaries_per_count``
  canaries. A canary is a note of about 78 words: ~26 words of canary-specific context (date, clinic, town,
  symptom: 30-45 tokens of the default tiny tokenizer, so a 30-token prefix is canary-specific), then the
  secret sentence (name, record number, phone; it ends before token 94 = prefix 30 + suffix 64), then a
  closing. All copies are identical and go into that client's train split only, in place of ordinary
  samples (|D_j| stays ``train_per_client``); the doctor's answer repeats the secret. Tag:
  ``{"canary": id, "copies": n}``.
- **Shared canaries.** One canary per count in ``shared_canary_copies``, its copies dealt round-robin over the
  canary clients (the same record held by several clients). Under FedAvg a client's own canary is averaged with
  updates that never saw it; a shared one is pushed by every holder. Tag: ``{..., "shared": True}``.
- **Public corpus.** ``public_size`` paragraphs (patient text + doctor answer, drawn as the clients' ordinary and
  boilerplate records are; some intake notes in the canary format with public names and numbers) from a separate
  random stream: never a canary, never a client sample. It trains the tiny tokenizer and gives the tiny base
  model its prior, so the clients' vocabulary is known to both and a record costs the prior only its particular
  combination of words.

Everything is a function of the seed and the config. ``ground_truth`` lists every client's record ids, every
canary (clients, copies, secret, record ids and their clients) and every boilerplate (text, record ids);
:func:`check_ground_truth` verifies it against the data and runs on every generation.
"""

from __future__ import annotations

import random

from fedmem.data import partition
from fedmem.data.records import ClientSplit, FederatedData, Record
from fedmem.data.seeding import rng_for
from fedmem.data.synthetic import text, vocab
from fedmem.data.templates import render_record

_MAX_TRIES = 1000


def _unique(make, seen: set[str]) -> tuple[str, str]:
    """Draw (patient, doctor) until the patient text is new; remember it."""
    for _ in range(_MAX_TRIES):
        patient, doctor = make()
        if patient not in seen:
            seen.add(patient)
            return patient, doctor
    raise RuntimeError("synthetic source: could not draw a new unique patient text (word lists too small?)")


def make_public_corpus(seed: int, size: int, generic_fraction: float, record_fraction: float
                       ) -> tuple[list[str], set[str], set[str]]:
    """(paragraphs, their patient texts, record numbers and phones of the record notes).

    All specialties, all boilerplates, and record notes in the canary format about *other* people (public names,
    numbers starting with 9): the base model learns what names, numbers and record notes look like, as a
    pretrained LLM has, so a canary is hard for the prior only because of its particular secret. Its own random
    stream.
    """
    rng = rng_for(seed, "public")
    names = list(vocab.SPECIALTIES)
    seen: set[str] = set()
    numbers: set[str] = set()
    out = []
    n_generic = 0
    for _ in range(size):
        specialty = rng.choice(names)
        r = rng.random()
        if r < record_fraction:
            note, nums = text.public_intake(rng, specialty)
            out.append(note)
            numbers.update(nums)
            continue
        if r < record_fraction + generic_fraction:
            bp = vocab.BOILERPLATE[n_generic % len(vocab.BOILERPLATE)]  # round-robin: every one equally often
            n_generic += 1
            patient, doctor = _unique(lambda: text.generic_dialog(rng, specialty, bp), seen)
        else:
            patient, doctor = _unique(lambda: text.ordinary_dialog(rng, specialty), seen)
        out.append(f"{patient} {doctor}")
    return out, seen, numbers


def _pool(rng: random.Random, specialty: str, n: int, generic_fraction: float, num_boilerplates: int,
          seen: set[str], id_prefix: str) -> list[tuple[str, dict, dict]]:
    """``n`` ordinary samples (id, fields, tags); ``round(n * generic_fraction)`` of them end in boilerplate."""
    n_generic = round(n * generic_fraction)
    generic_at = set(rng.sample(range(n), n_generic))
    bp_cycle = 0
    out = []
    for i in range(n):
        if i in generic_at:
            k = bp_cycle % num_boilerplates
            bp_cycle += 1
            bp = vocab.BOILERPLATE[k]
            patient, doctor = _unique(lambda: text.generic_dialog(rng, specialty, bp), seen)
            tags = {"generic": True, "boilerplate": f"bp{k}"}
        else:
            patient, doctor = _unique(lambda: text.ordinary_dialog(rng, specialty), seen)
            tags = {}
        out.append((f"{id_prefix}-{i:05d}", {"patient": patient, "doctor": doctor}, tags))
    return out


def make_synthetic(task, data, seed: int) -> FederatedData:
    """The synthetic federated dataset described in the module docstring."""
    L = data.num_clients
    specialties = [data.specialties[c % len(data.specialties)] for c in range(L)]
    public, seen, public_numbers = make_public_corpus(seed, data.public_size, data.public_generic_fraction,
                                                      data.public_record_fraction)
    public_patients = set(seen)  # client texts must avoid these; ``seen`` grows with the clients' texts

    by_client = data.canary_copies_by_client()
    n_ordinary = [data.train_per_client - by_client[c]
                  for c in range(L)]  # canary copies take the place of ordinary samples: |D_j| = train_per_client
    train_pools, test_pools = _ordinary_pools(data, seed, specialties, n_ordinary, seen)
    if task.partition != "natural":  # pool everything and re-split, for iid / Dirichlet baselines
        train_pools, test_pools = _repartition(task, data, seed, specialties, n_ordinary, train_pools, test_pools)
    avoid = set(public) | public_numbers  # a canary is never in the public corpus, not even its numbers
    canaries, placed = _plant_canaries(data, seed, specialties, avoid)

    clients = []
    for c in range(L):
        train_rows = list(train_pools[c]) + placed[c]
        rng_for(seed, "order", c).shuffle(train_rows)  # canary copies spread through the epoch
        clients.append(ClientSplit(train=_render(task, train_rows, c), test=_render(task, test_pools[c], c)))

    truth = _ground_truth(task, data, seed, specialties, clients, canaries, public_patients)
    fd = FederatedData(clients=clients, public_corpus=public, ground_truth=truth, source="synthetic")
    check_ground_truth(fd)
    return fd


def _ordinary_pools(data, seed: int, specialties: list[str], n_ordinary: list[int], seen: set[str]
                    ) -> tuple[list[list], list[list]]:
    """(train pools, test pools) of ordinary samples, one per client: one pool of the client's texts, split at random
    within its boilerplate and its other records (each split holds its share of boilerplate). Texts are unique (each
    drawn again until it is new), so a text drawn later is less typical of the specialty than one drawn earlier:
    drawing the training texts first and the held-out ones after them made the held-out arm of every comparison the
    less typical one. Split at random, the arms are exchangeable."""
    train_pools, test_pools = [], []
    for c in range(data.num_clients):
        n_train, n_test = n_ordinary[c], data.test_per_client
        rows = _pool(rng_for(seed, "client", c), specialties[c], n_train + n_test, data.generic_fraction,
                     data.num_boilerplates, seen, f"syn-c{c}")
        rng = rng_for(seed, "train-test", c)
        generic, other = [r for r in rows if r[2]], [r for r in rows if not r[2]]
        rng.shuffle(generic)
        rng.shuffle(other)
        g_train = round(n_train * data.generic_fraction)
        train = generic[:g_train] + other[: n_train - g_train]
        test = generic[g_train:] + other[n_train - g_train:]
        rng.shuffle(train)
        rng.shuffle(test)
        train_pools.append(train)
        test_pools.append(test)
    return train_pools, test_pools


def _repartition(task, data, seed: int, specialties: list[str], n_ordinary: list[int], train_pools: list[list],
                 test_pools: list[list]) -> tuple[list[list], list[list]]:
    """(train pools, test pools) of all clients' ordinary samples pooled and re-split iid or by Dirichlet."""
    L = data.num_clients
    rows = [(s, c) for c in range(L) for s in train_pools[c] + test_pools[c]]
    if task.partition == "iid":
        parts = partition.iid(len(rows), L, seed)
    else:
        parts = partition.dirichlet([specialties[c] for _, c in rows], L, task.dirichlet_alpha, seed)
    train_pools, test_pools = [], []
    for c, part in enumerate(parts):
        tr, te = partition.split_train_test(part, n_ordinary[c], data.test_per_client,
                                            rng_for(seed, "split", c), c)
        train_pools.append([rows[i][0] for i in tr])
        test_pools.append([rows[i][0] for i in te])
    return train_pools, test_pools


def _plant_canaries(data, seed: int, specialties: list[str], avoid: set[str]
                    ) -> tuple[list[dict], dict[int, list[tuple[str, dict, dict]]]]:
    """(canary entries, each client's canary copies): every copy goes into its client's train split only."""
    canary_clients = data.canary_holders()
    canary_rng = rng_for(seed, "canaries")
    canaries: list[dict] = []
    placed: dict[int, list[tuple[str, dict, dict]]] = {c: [] for c in range(data.num_clients)}
    used_names: set[str] = set()
    serial = 0
    for copies in data.canary_copies:
        for c in canary_clients:
            for _ in range(data.canaries_per_count):
                k = text.make_canary(canary_rng, serial, specialties[c], used_names, avoid)
                serial += 1
                _place_canary(k, copies, [c] * copies, canaries, placed, shared=False)
    for t, copies in enumerate(data.shared_canary_copies):  # one canary, its copies dealt over the canary clients
        holders = data.shared_copy_clients(t)
        k = text.make_canary(canary_rng, serial, specialties[holders[0]], used_names, avoid)
        serial += 1
        _place_canary(k, copies, holders, canaries, placed, shared=True)
    return canaries, placed


def _place_canary(k, copies: int, holders: list[int], canaries: list[dict],
                  placed: dict[int, list[tuple[str, dict, dict]]], shared: bool) -> None:
    """Record canary ``k`` in ``canaries`` and put each of its copies in its holder's ``placed`` rows."""
    ids = [f"{k.id}-copy{m:02d}" for m in range(copies)]
    canaries.append({"canary": k, "client": holders[0], "clients": sorted(set(holders)), "copies": copies,
                     "shared": shared, "record_ids": ids, "record_clients": holders})
    tags = {"canary": k.id, "copies": copies, **({"shared": True} if shared else {})}
    for rid, c in zip(ids, holders):
        placed[c].append((rid, {"patient": k.patient, "doctor": k.doctor}, dict(tags)))


def _render(task, rows, c: int) -> list[Record]:
    """Client ``c``'s (id, fields, tags) rows rendered as records of the task."""
    return [render_record(task.user_template, task.assistant_template, task.mem_field, fields, rid,
                          client=c, tags=tags) for rid, fields, tags in rows]


def _ground_truth(task, data, seed, specialties, clients, canaries, public_patients) -> dict:
    boiler = []
    for k in range(data.num_boilerplates):
        bid = f"bp{k}"
        ids = [r.id for split in clients for r in split.train + split.test if r.tags.get("boilerplate") == bid]
        holders = sorted({r.client for split in clients for r in split.train + split.test
                          if r.tags.get("boilerplate") == bid})
        boiler.append({"id": bid, "text": vocab.BOILERPLATE[k], "clients": holders, "record_ids": ids,
                       "in_public_corpus": True})
    out_canaries = []
    for entry in canaries:
        k = entry["canary"]
        start = k.patient.index(k.secret)
        out_canaries.append({
            "id": k.id,
            "client": entry["client"],  # the first holder; ``clients`` lists all (several for a shared canary)
            "clients": entry["clients"],
            "shared": entry["shared"],
            "copies": entry["copies"],
            "secret": k.secret,
            "secret_parts": dict(k.parts),
            # the secret part drawn at random and the values it was drawn from (canary exposure ranks it among them)
            "secret_space": {"part": "record_number", "candidates": list(k.record_number_space)},
            "mem_text": k.patient,
            "secret_char_span": [start, start + len(k.secret)],
            "secret_word_offset": len(k.patient[:start].split()),
            "mem_text_words": len(k.patient.split()),
            "record_ids": list(entry["record_ids"]),
            "record_clients": list(entry["record_clients"]),
        })
    return {
        "source": "synthetic",
        "task": task.name,
        "seed": seed,
        "partition": task.partition,
        "clients": [
            {"client": c, "name": specialties[c], "train_ids": [r.id for r in s.train],
             "test_ids": [r.id for r in s.test]}
            for c, s in enumerate(clients)
        ],
        "canaries": out_canaries,
        "boilerplate": boiler,
        "public_size": data.public_size,
        "public_patient_texts": len(public_patients),
    }


def check_ground_truth(fd: FederatedData) -> None:
    """Raise AssertionError unless the ground truth describes the data exactly.

    Every canary's secret (and each secret part) occurs in exactly its record ids, each in its stated client's
    train split, as many as its copies, nowhere else and never in the public corpus; every boilerplate occurs in
    exactly the records tagged with it; the per-client id lists match the splits.
    """
    truth = fd.ground_truth
    records = [(c, split, r) for c, split, r in fd.all_records()]
    for entry, split in zip(truth["clients"], fd.clients):
        if entry["train_ids"] != [r.id for r in split.train] or entry["test_ids"] != [r.id for r in split.test]:
            raise AssertionError(f"ground truth: client {entry['client']}'s record ids do not match its splits")
    ids = [r.id for _, _, r in records]
    if len(ids) != len(set(ids)):
        raise AssertionError("ground truth: record ids are not unique")
    for k in truth["canaries"]:
        for needle in [k["secret"], *k["secret_parts"].values()]:
            hits = [(c, split, r.id) for c, split, r in records
                    if needle in r.user or needle in r.assistant or needle in r.mem_text]
            expected = [(c, "train", rid) for c, rid in zip(k["record_clients"], k["record_ids"])]
            if sorted(hits) != sorted(expected) or len(hits) != k["copies"]:
                raise AssertionError(f"ground truth: canary {k['id']} ({needle!r}) is in {hits}, truth says {expected}")
            if any(needle in p for p in fd.public_corpus):
                raise AssertionError(f"ground truth: canary {k['id']} leaked into the public corpus")
        tagged = [r.id for _, _, r in records if r.tags.get("canary") == k["id"]]
        if sorted(tagged) != sorted(k["record_ids"]):
            raise AssertionError(f"ground truth: canary {k['id']} tags do not match its record ids")
    for b in truth["boilerplate"]:
        hits = sorted(r.id for _, _, r in records if r.mem_text.endswith(b["text"]))
        if hits != sorted(b["record_ids"]):
            raise AssertionError(f"ground truth: boilerplate {b['id']} is in other records than stated")
