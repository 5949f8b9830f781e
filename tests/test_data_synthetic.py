"""The synthetic source: its ground truth matches the data it wrote, it is reproducible from the seed, canaries and
boilerplate sit where the audits need them, and the public corpus is disjoint from the clients."""

import dataclasses
import json
import random
import re
import time
from collections import Counter

import pytest

from fedmem.data import (
    DataConfig,
    TaskConfig,
    load_federated,
    read_ground_truth,
    write_ground_truth,
)
from fedmem.data.synthetic import check_ground_truth, vocab
from tests.fixtures.bpe import bpe_tokenizer

# own canaries only; a boilerplate share above the default's, so that every client holds every boilerplate; the
# generator's own records only (the privacy audit's canaries: test_one_run.py)
SMALL = dict(train_per_client=80, test_per_client=10, public_size=300, shared_canary_copies=[], generic_fraction=0.2,
             audit_canaries=0)


@pytest.fixture(scope="module")
def fd():
    return load_federated(TaskConfig(name="dialog"), DataConfig(**SMALL), seed=0)


def _records(fd):
    return list(fd.all_records())


def test_sizes_with_canary_copies_in_place_of_ordinary_samples(fd):
    assert [(len(c.train), len(c.test)) for c in fd.clients] == [(80, 10)] * 3  # |D_j| = train_per_client
    copies = sum([1, 2, 4, 8, 16])  # one canary per count in every client
    assert [sum("canary" in r.tags for r in c.train) for c in fd.clients] == [copies] * 3
    assert len(fd.public_corpus) == 300
    assert fd.ground_truth["public_size"] == 300


def test_every_canary_is_exactly_in_its_client_with_its_copies(fd):
    """Recomputed from the records, independently of check_ground_truth."""
    truth = fd.ground_truth["canaries"]
    assert sorted((k["client"], k["copies"]) for k in truth) == sorted(
        (c, n) for c in range(3) for n in (1, 2, 4, 8, 16))
    assert len({k["secret"] for k in truth}) == len(truth)
    for k in truth:
        for needle in [k["secret"], *k["secret_parts"].values()]:
            where = [(c, split, r.id) for c, split, r in _records(fd)
                     if needle in r.user or needle in r.assistant]
            assert sorted(where) == sorted((k["client"], "train", rid) for rid in k["record_ids"])
            assert len(where) == k["copies"]
            assert not any(needle in p for p in fd.public_corpus)
        copies = [r for _, _, r in _records(fd) if r.id in k["record_ids"]]
        assert {r.mem_text for r in copies} == {k["mem_text"]}  # identical copies
        assert all(r.tags == {"canary": k["id"], "copies": k["copies"]} for r in copies)
        assert k["mem_text"] not in " ".join(fd.public_corpus)


def test_canary_text_shape(fd):
    """Long, identical copies; the secret after ~26 words of canary-specific context."""
    contexts = set()
    for k in fd.ground_truth["canaries"]:
        words = k["mem_text"].split()
        assert len(words) >= 60
        a, b = k["secret_char_span"]
        assert k["mem_text"][a:b] == k["secret"]
        assert 22 <= k["secret_word_offset"] <= 36
        assert all(p in k["secret"] for p in k["secret_parts"].values())
        contexts.add(" ".join(words[:12]))
    assert len(contexts) == len(fd.ground_truth["canaries"])  # the first 12 words already tell canaries apart


def test_canary_secret_lies_in_the_default_audit_suffix():
    """With a tokenizer like the tiny preset's (byte-level BPE, 2048 merges on the public corpus), the secret starts
    after a 30-token prefix and ends within the next 64 tokens (the default audit.prefix_len, and Prior-Aware's
    fixed suffix length audit.pa.suffix_len)."""
    full = load_federated(TaskConfig(name="dialog"), DataConfig(train_per_client=60, test_per_client=5), seed=0)
    tok = bpe_tokenizer(full.public_corpus, vocab_size=2048)
    for k in full.ground_truth["canaries"]:
        a, b = k["secret_char_span"]
        start = len(tok(k["mem_text"][:a])["input_ids"])
        end = len(tok(k["mem_text"][:b])["input_ids"])
        assert 30 <= start and end <= 30 + 64, (k["id"], start, end)
    # at the default public corpus size every canary's first and last name also occur in public notes: the
    # base model knows the names, and only their combination (and the numbers) is secret
    public = " ".join(full.public_corpus)
    for k in full.ground_truth["canaries"]:
        name = k["secret_parts"]["name"]
        assert name not in public and all(f"is {w} " in public or f" {w}," in public for w in name.split()), name


def test_boilerplate_starts_after_the_default_audit_prefix():
    """Boilerplate starts after a 30-token prefix (tiny-preset-like tokenizer): a prefix that ended in its first
    words would make Prior-Aware memorization flag the shared text."""
    full = load_federated(TaskConfig(name="dialog"), DataConfig(train_per_client=60, test_per_client=5,
                                                                generic_fraction=0.3), seed=0)
    tok = bpe_tokenizer(full.public_corpus, vocab_size=2048)
    closings = [b["text"] for b in full.ground_truth["boilerplate"]]
    starts = [len(tok(r.mem_text[: -len(t)])["input_ids"])
              for _, _, r in full.all_records() for t in closings if r.mem_text.endswith(t)]
    assert len(starts) >= 12 and min(starts) >= 30, sorted(starts)[:5]


def test_boilerplate_is_shared_by_all_clients_and_public(fd):
    truth = fd.ground_truth["boilerplate"]
    assert [b["id"] for b in truth] == ["bp0", "bp1", "bp2", "bp3"]
    for b in truth:
        holders = {(c, split) for c, split, r in _records(fd) if r.mem_text.endswith(b["text"])}
        assert {(c, "train") for c in range(3)} <= holders  # every client's train split
        assert b["clients"] == [0, 1, 2]
        tagged = sorted(r.id for _, _, r in _records(fd) if r.tags.get("boilerplate") == b["id"])
        assert tagged == sorted(b["record_ids"])
        assert all(r.tags == {"generic": True, "boilerplate": b["id"]}
                   for _, _, r in _records(fd) if r.id in b["record_ids"])
        # it follows many different openings, in the clients and in the public corpus
        openings = {r.mem_text[: -len(b["text"])] for _, _, r in _records(fd) if r.id in b["record_ids"]}
        assert len(openings) == len(b["record_ids"]) >= 6
        assert sum(b["text"] in p for p in fd.public_corpus) >= 10
    untagged = [r for _, _, r in _records(fd) if not r.tags]
    assert not any(b["text"] in r.mem_text for b in truth for r in untagged)
    n_generic = sum(1 for _, _, r in _records(fd) if r.tags.get("generic"))
    assert n_generic == 3 * (round((80 - 31) * 0.2) + round(10 * 0.2))


def test_public_corpus_is_disjoint_from_every_client_sample(fd):
    public = "\n".join(fd.public_corpus)
    for _, _, r in _records(fd):
        assert r.mem_text not in public and r.assistant not in public
    assert any("My full name is" in p for p in fd.public_corpus)  # the canary format, with public names only
    names = {n for p in fd.public_corpus for n in re.findall(r"My full name is ([A-Z][a-z]+ [A-Z][a-z]+),", p)}
    canary_names = {k["secret_parts"]["name"] for k in fd.ground_truth["canaries"]}
    assert names and canary_names and not names & canary_names
    for n in names | canary_names:  # familiar names (one shared pool), combinations split between the two
        first, last = n.split()
        assert first in vocab.FIRST_NAMES and last in vocab.LAST_NAMES


def test_public_corpus_speaks_the_clients_language():
    """The public corpus is drawn like the clients' texts (and disjoint from them, above): at the default size
    nearly every word of the clients' ordinary texts also occurs in it, so the tiny tokenizer and base model know
    the vocabulary and a record is hard for the prior only for its particular combination of words."""
    full = load_federated(TaskConfig(name="dialog"), DataConfig(train_per_client=200, test_per_client=50), seed=0)

    def words(texts):
        return {w.lower() for t in texts for w in re.findall(r"[A-Za-z']+", t)}

    client = words(r.mem_text for _, _, r in full.all_records() if not r.tags)
    missing = client - words(full.public_corpus)
    assert len(client) > 1000 and len(missing) <= 0.01 * len(client), sorted(missing)


def test_samples_are_unique_and_look_like_their_specialty(fd):
    texts = Counter(r.mem_text for _, _, r in _records(fd) if "canary" not in r.tags)
    assert max(texts.values()) == 1
    for c, specialty in enumerate(["cardiology", "dermatology", "gastroenterology"]):
        own = vocab.SPECIALTIES[specialty]["symptoms"]
        for r in fd.clients[c].train + fd.clients[c].test:
            if not r.tags:
                assert any(s in r.mem_text for s in own)
                assert len(r.mem_text.split()) >= 45
                quoted = re.search(r'You wrote: "(.*?)"', r.assistant).group(1)
                assert quoted in r.mem_text[len(r.mem_text) // 3:]  # the quote comes from the later part
            assert r.user.startswith("If you are a doctor, please answer the medical questions based on the "
                                     "patient's description. ")
    assert [c["name"] for c in fd.ground_truth["clients"]] == ["cardiology", "dermatology", "gastroenterology"]


def test_default_sizes_boilerplate_share_and_speed():
    """By default: 600 held-out records per client (MR's control draws 600 held-out prefixes), 5% of the ordinary
    records end in boilerplate, and the whole source is drawn in seconds."""
    data = DataConfig()
    assert (data.train_per_client, data.test_per_client, data.generic_fraction) == (700, 600, 0.05)
    start = time.perf_counter()
    full = load_federated(TaskConfig(name="dialog"), data, seed=0)
    assert time.perf_counter() - start < 30
    n_ordinary = 700 - data.canary_copies_by_client()[0]
    for split in full.clients:
        assert len(split.test) == 600
        assert sum(r.tags.get("generic", False) for r in split.train) == round(n_ordinary * 0.05)
        assert sum(r.tags.get("generic", False) for r in split.test) == round(600 * 0.05)


def _continuations(tok, texts: list[str], prefix_len: int = 30) -> list[str]:
    """Each text's true continuation after its first ``prefix_len`` tokens, as the audit splits it."""
    return [tok.decode(tok(t, add_special_tokens=False)["input_ids"][prefix_len:]) for t in texts]


def test_a_fresh_ordinary_text_rarely_matches_the_training_suffixes(detector):
    """The data floor, no model involved: a held-out record's true continuation after a 30-token prefix (tokenizer
    as the tiny preset's), put through MR's retrieval (top 10 of 600 training suffixes per client) and detector as
    if a model had generated it, matches its own client at most 5% and another client at most 1% of the time for an
    ordinary record; a boilerplate record matches every client (it is tagged generic). So an ordinary record is
    distinctive: a model that reproduces it has memorized it."""
    from fedmem.audit.mr.detector import CATEGORIES
    from fedmem.audit.mr.suffix_index import query_terms, suffix_index

    full = load_federated(TaskConfig(name="dialog"), DataConfig(test_per_client=100), seed=1)
    tok = bpe_tokenizer(full.public_corpus, vocab_size=2048)
    canaries = {k["mem_text"] for k in full.ground_truth["canaries"]}
    suffixes = {}
    for c, split in enumerate(full.clients):  # drawn as the audit draws them: canaries, then a seeded shuffle
        texts = list(dict.fromkeys(r.mem_text for r in split.train))
        rest = [t for t in texts if t not in canaries]
        random.Random(c).shuffle(rest)
        suffixes[c] = _continuations(tok, ([t for t in texts if t in canaries] + rest)[:600])
    held = [(c, r) for c, split in enumerate(full.clients) for r in split.test]
    continuations = _continuations(tok, [r.mem_text for _, r in held])
    terms = [query_terms(t) for t in continuations]
    pairs, owners = [], []
    for k, sfx in suffixes.items():
        for i, found in enumerate(suffix_index(sfx).search_terms(terms, 10)):
            pairs += [(continuations[i], sfx[doc]) for doc, _ in found]
            owners += [(i, k)] * len(found)
    hits = [set() for _ in held]
    for (i, k), det in zip(owners, detector.detect_batch(pairs)):
        if det.category in CATEGORIES:
            hits[i].add(k)
    ordinary = [(c, hit) for (c, r), hit in zip(held, hits) if not r.tags]
    generic = [hit for (_, r), hit in zip(held, hits) if r.tags.get("generic")]
    assert len(ordinary) >= 280 and len(generic) >= 12
    own = sum(c in hit for c, hit in ordinary) / len(ordinary)
    other = sum(len(hit - {c}) for c, hit in ordinary) / (2 * len(ordinary))
    assert own <= 0.05 and other <= 0.01, (own, other)
    assert all(hit == {0, 1, 2} for hit in generic)


def test_same_seed_same_data_other_seed_other_data():
    task, data = TaskConfig(name="dialog"), DataConfig(**SMALL)
    a, b, c = (load_federated(task, data, seed=s) for s in (5, 5, 6))
    assert a.clients == b.clients and a.public_corpus == b.public_corpus and a.ground_truth == b.ground_truth
    assert [r.mem_text for _, _, r in _records(a)] != [r.mem_text for _, _, r in _records(c)]
    assert a.public_corpus != c.public_corpus
    assert {k["secret"] for k in a.ground_truth["canaries"]} != {k["secret"] for k in c.ground_truth["canaries"]}


def test_ground_truth_round_trips_and_is_saved_next_to_the_data(fd, tmp_path):
    path = write_ground_truth(fd, tmp_path / "run")
    assert path.name == "ground_truth.json" and read_ground_truth(tmp_path / "run") == fd.ground_truth
    assert not list((tmp_path / "run").glob(".ground_truth.json.*"))  # no temp file left behind
    saved = load_federated(TaskConfig(name="dialog"), DataConfig(**SMALL), seed=0, cache_dir=str(tmp_path / "cache"))
    truth = read_ground_truth(saved.saved_to)
    assert truth == json.loads(json.dumps(fd.ground_truth))
    rows = [json.loads(x) for x in (tmp_path / "cache" / saved.saved_to.split("/cache/")[1] / "records.jsonl")
            .read_text().splitlines()]
    for k in truth["canaries"]:  # the saved file agrees with the truth, read back from disk alone
        hits = [(x["client"], x["split"], x["id"]) for x in rows if k["secret"] in x["user"]]
        assert sorted(hits) == sorted((k["client"], "train", rid) for rid in k["record_ids"])


def test_check_ground_truth_catches_a_wrong_truth(fd):
    bad = dataclasses.replace(fd, ground_truth=json.loads(json.dumps(fd.ground_truth)))
    bad.ground_truth["canaries"][0]["record_clients"][0] = (bad.ground_truth["canaries"][0]["client"] + 1) % 3
    with pytest.raises(AssertionError, match="canary"):
        check_ground_truth(bad)
    bad = dataclasses.replace(fd, public_corpus=fd.public_corpus + [fd.ground_truth["canaries"][2]["mem_text"]])
    with pytest.raises(AssertionError, match="public corpus"):
        check_ground_truth(bad)


def test_canary_options_and_two_clients():
    data = DataConfig(num_clients=2, train_per_client=24, test_per_client=6, public_size=200,
                      canary_copies=[1, 3], canaries_per_count=2, canary_clients=[1],
                      shared_canary_copies=[], audit_canaries=0)
    fd = load_federated(TaskConfig(name="dialog"), data, seed=0)
    truth = fd.ground_truth["canaries"]
    assert sorted(k["copies"] for k in truth) == [1, 1, 3, 3] and {k["client"] for k in truth} == {1}
    assert [len(c.train) for c in fd.clients] == [24, 24]
    assert [sum("canary" in r.tags for r in c.train) for c in fd.clients] == [0, 2 * (1 + 3)]
    none = load_federated(TaskConfig(name="dialog"), dataclasses.replace(data, canaries_per_count=0), seed=0)
    assert none.ground_truth["canaries"] == [] and [len(c.train) for c in none.clients] == [24, 24]


def test_shared_canaries_are_dealt_round_robin_over_the_canary_clients():
    data = DataConfig(num_clients=3, train_per_client=30, test_per_client=6, public_size=200,
                      canary_copies=[1, 2], shared_canary_copies=[2, 7], canary_clients=[0, 2], audit_canaries=0)
    assert data.canary_copies_by_client() == {0: 3 + 1 + 3, 1: 0, 2: 3 + 1 + 4}  # 2 -> [0, 2]; 7 -> [2, 0, 2, ...]
    fd = load_federated(TaskConfig(name="dialog"), data, seed=0)
    shared = [k for k in fd.ground_truth["canaries"] if k["shared"]]
    assert [(k["copies"], k["clients"]) for k in shared] == [(2, [0, 2]), (7, [0, 2])]
    assert shared[1]["record_clients"] == [2, 0, 2, 0, 2, 0, 2]
    for k in shared:  # every copy sits in the train split of the client the truth names, tagged as shared
        for rid, c in zip(k["record_ids"], k["record_clients"]):
            rec = next(r for r in fd.clients[c].train if r.id == rid)
            assert rec.tags == {"canary": k["id"], "copies": k["copies"], "shared": True}
            assert k["secret"] in rec.mem_text
    assert [len(c.train) for c in fd.clients] == [30, 30, 30]
    own = [k for k in fd.ground_truth["canaries"] if not k["shared"]]
    plain = load_federated(TaskConfig(name="dialog"), dataclasses.replace(data, shared_canary_copies=[]), seed=0)
    assert [k["secret"] for k in own] == [k["secret"] for k in plain.ground_truth["canaries"]]  # own ones unchanged
    with pytest.raises(ValueError, match="shared_canary_copies must be distinct counts >= 2"):
        DataConfig(shared_canary_copies=[1])


def test_hundreds_of_canaries_keep_unique_secrets():
    """480 canaries: every name, record number and phone occurs in exactly its own copies (check_ground_truth runs
    on every generation and would raise otherwise)."""
    data = DataConfig(train_per_client=300, test_per_client=5, public_size=400, canary_copies=[1, 2],
                      canaries_per_count=80, generic_fraction=0.1, shared_canary_copies=[])
    fd = load_federated(TaskConfig(name="dialog"), data, seed=3)
    parts = [p for k in fd.ground_truth["canaries"] for p in k["secret_parts"].values()]
    assert len(fd.ground_truth["canaries"]) == 480 and len(set(parts)) == len(parts)


def test_too_many_canary_copies_is_one_clear_error():
    with pytest.raises(ValueError, match="46 canary copies .* fewer than data.train_per_client=24"):
        DataConfig(train_per_client=24)  # 31 own + 15 shared (3 + 6 + 12 + 24 dealt over 3 clients)
    DataConfig(source="hf", train_per_client=24)  # canary options mean nothing to other sources
    from fedmem.data.sources.synthetic import MAX_CANARIES
    from fedmem.data.synthetic.text import MAX_CANARY_NAMES

    assert MAX_CANARIES == MAX_CANARY_NAMES == 512  # the config's limit is the name pool's size
    with pytest.raises(ValueError, match="at most 512"):
        DataConfig(num_clients=5, canaries_per_count=30, canary_copies=list(range(1, 5)), train_per_client=9999)


def test_iid_partition_mixes_specialties_but_keeps_canaries_in_place():
    fd = load_federated(TaskConfig(name="dialog", partition="iid"), DataConfig(**SMALL), seed=0)
    for c, split in enumerate(fd.clients):
        origins = Counter(r.id.split("-")[1] for r in split.train + split.test if r.id.startswith("syn-"))
        assert len(origins) == 3  # samples of all three specialty pools
        assert (len(split.train), len(split.test)) == (80, 10)
    for k in fd.ground_truth["canaries"]:
        assert all(r.id in k["record_ids"] for r in fd.clients[k["client"]].train if r.tags.get("canary") == k["id"])
    check_ground_truth(fd)
