"""The public corpus of local and Hugging Face data (a seeded share of each client's rows, a column, or a file),
the plain-text task, and the tiny preset built from the data it is given (its tokenizer and prior)."""

import json

import pytest

from bench.references import english_passages
from fedmem.data import (
    DataConfig,
    TaskConfig,
    format_example,
    format_prompt,
    load_federated,
)

SECTIONS = ["alpha", "beta", "gamma"]


@pytest.fixture(scope="module")
def prose(tmp_path_factory):
    """Real English prose (the licence texts fedmem's dependencies install) as a local JSONL: text, section (the
    client), a public flag."""
    passages = english_passages(words_per_passage=60, stride=60)
    assert len(passages) >= 300, "needs the dependencies' licence texts (bench/references.py)"
    path = tmp_path_factory.mktemp("prose") / "prose.jsonl"
    rows = [{"text": t, "section": SECTIONS[i % 3], "open": "yes" if i % 10 == 0 else "no"}
            for i, t in enumerate(passages[:300])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


def _load(path, seed=0, **data):
    kw = {"source": "local", "path": str(path), "client_column": "section", "train_per_client": 50,
          "test_per_client": 10, **data}
    return load_federated(TaskConfig(name="text"), DataConfig(**kw), seed=seed)


def _ids(fd):
    return {r.id for _, _, r in fd.all_records()}


def test_public_share_is_disjoint_from_every_client_and_reproducible(prose):
    path, rows = prose
    fd = _load(path)
    public = fd.ground_truth["public"]
    assert public["source"] == "share" and public["share"] == 0.2
    assert public["rows"] == 60 and [c["rows_to_public"] for c in fd.ground_truth["clients"]] == [20, 20, 20]
    public_ids = set(public["row_ids"])
    assert not public_ids & _ids(fd)  # never trained on as client data nor audited
    members = {r.mem_text for _, _, r in fd.all_records()}
    assert fd.public_corpus == [rows[int(i[3:])]["text"] for i in public["row_ids"]]
    assert not set(fd.public_corpus) & members
    # each client's share comes from its own rows
    for c, name in enumerate(sorted(SECTIONS)):
        assert {rows[int(i[3:])]["section"] for i in public["row_ids"][20 * c : 20 * c + 20]} == {name}
    again, other = _load(path), _load(path, seed=1)
    assert again.ground_truth["public"]["row_ids"] == public["row_ids"] and again.public_corpus == fd.public_corpus
    assert set(other.ground_truth["public"]["row_ids"]) != public_ids


def test_public_rows_from_a_column_or_a_file(prose, tmp_path):
    path, rows = prose
    fd = _load(path, public="open")
    flagged = {f"row{i}" for i, r in enumerate(rows) if r["open"] == "yes"}
    assert set(fd.ground_truth["public"]["row_ids"]) == flagged and not flagged & _ids(fd)
    assert len(fd.public_corpus) == len(flagged)
    extra = tmp_path / "public.csv"
    extra.write_text('text\nOne public sentence about nothing in particular.\n"Another, equally public."\n')
    fd = _load(path, public=str(extra))
    assert fd.public_corpus == ["One public sentence about nothing in particular.", "Another, equally public."]
    assert fd.ground_truth["public"]["source"] == "file" and fd.ground_truth["public"]["rows"] == 0
    assert sum(len(c.train) + len(c.test) for c in fd.clients) == 180  # no client row was moved


def test_a_share_that_starves_a_client_is_one_clear_error(prose):
    path, _ = prose
    with pytest.raises(ValueError, match=r"data.public_share=0.5 moves 50 of client 'alpha''s 100 rows to the "
                                         r"public corpus, leaving 50 for data.train_per_client \+ "
                                         r"data.test_per_client = 60"):
        _load(path, public_share=0.5)
    with pytest.raises(ValueError, match="column 'nope' not found"):
        _load(path, public="nope")
    with pytest.raises(ValueError, match="data.public_share must be in"):
        DataConfig(source="local", path=str(path), public_share=1.0)
    with pytest.raises(ValueError, match="data.public is not used by data.source=synthetic; it is a setting of data.source=hf or local"):
        DataConfig(public="open")


def test_plain_text_task_trains_the_text_as_continuation(prose, tiny_tokenizer_en):
    path, _ = prose
    fd = _load(path)
    r = fd.clients[0].train[0]
    assert r.user == r.mem_text and r.assistant == ""
    tok = tiny_tokenizer_en
    assert format_example(tok, r.user, r.assistant, plain=True) == r.mem_text + tok.eos_token
    assert format_prompt(tok, "Some prefix", plain=True) == "Some prefix"
    assert "<|im_start|>" in format_prompt(tok, "Some prefix")  # the chat tasks keep their template


def test_plain_text_audit_samples_prompt_with_the_bare_prefix(prose, tiny_tokenizer_en):
    from fedmem.audit.config import AuditConfig
    from fedmem.audit.pool import build_audit_pool

    path, _ = prose
    task = TaskConfig(name="text")
    fd = _load(path)
    run = build_audit_pool(AuditConfig(samples_per_client=4, test_per_client=4, prefix_len=16),
                          task, fd, tiny_tokenizer_en, seed=0)
    s = run.test[0][0]
    assert s.prompt_ids == s.prefix_ids and s.prefix_text == tiny_tokenizer_en.decode(list(s.prefix_ids))
    assert s.full_prompt_ids == s.prompt_ids and s.reference == s.suffix_text  # utility scores the continuation


@pytest.fixture(scope="module")
def tiny_tokenizer_en(prose):
    from fedmem.engine.model.tiny import train_tokenizer

    path, rows = prose
    return train_tokenizer([r["text"] for r in rows], 512)


def test_the_tiny_base_is_built_from_the_datas_public_corpus_and_cached_by_it(prose, tmp_path, monkeypatch):
    import fedmem.engine.model.tiny as tiny
    from fedmem.data.synthetic import make_public_corpus
    from fedmem.engine.config import TinyModelConfig

    path, rows = prose
    cfg = TinyModelConfig(vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128)
    own = _load(path).public_corpus
    synthetic = make_public_corpus(0, 60, 0.3, 0.25)[0]
    _, tok_own, dir_own = tiny.load_or_build_tiny(cfg, own, 0, str(tmp_path), progress=False)
    _, tok_syn, dir_syn = tiny.load_or_build_tiny(cfg, synthetic, 0, str(tmp_path), progress=False)
    assert dir_own != dir_syn  # keyed by the corpus
    # the client's text costs fewer tokens under the tokenizer built from its own kind of text
    text = " ".join(r["text"] for r in rows[1:40])
    assert len(tok_own(text)["input_ids"]) < 0.9 * len(tok_syn(text)["input_ids"])

    def rebuild(*a, **k):
        raise AssertionError("the cached base was rebuilt")

    monkeypatch.setattr(tiny, "train_tokenizer", rebuild)
    assert tiny.load_or_build_tiny(cfg, list(own), 0, str(tmp_path), progress=False)[2] == dir_own


def test_a_local_text_run_builds_its_own_tokenizer_and_reports_truncation(prose, cache_dir, tmp_path):
    from fedmem.cli import run_experiment
    from fedmem.config.compose import compose_dict
    from fedmem.config.experiment import from_dict
    from fedmem.experiment.loading import base_model
    from tests.conftest import FAST

    path, _ = prose
    fast = [o for o in FAST if not o.startswith(("data.public_size", "data.canary", "data.shared"))]
    d = compose_dict([*fast, f"cache_dir={cache_dir}", "task=text", "data=local", f"data.path={path}",
                      "data.client_column=section", "data.num_clients=3", "data.train_per_client=24",
                      "data.test_per_client=6", "model.max_seq_len=auto"])
    run = run_experiment(d, str(tmp_path / "run"))
    report = json.loads((run / "round_1" / "report.json").read_text())
    assert report["config"]["task"]["name"] == "text"
    for m in report["train"]:  # auto: the longest rendered example, so nothing is cut
        assert m["truncated_examples"] == 0 and m["max_seq_len"] > 60
    _, tokenizer, where = base_model(from_dict(d))
    assert len(tokenizer(" License")["input_ids"]) == 1  # built on the prose: a common licence word is one token


def test_membership_column_decides_train_test_and_public_rows(prose, tmp_path):
    """With data.membership_column each client's train rows are drawn from its rows marked train, its test rows
    from those marked test, the public corpus is the rows marked public, and the ground truth says so; a value
    outside train / test / public is one line naming the row."""
    _, rows = prose
    marks = ["public" if i % 10 == 0 else "test" if i % 4 == 1 else "train" for i in range(len(rows))]
    path = tmp_path / "marked.jsonl"
    path.write_text("".join(json.dumps({**r, "seen": m}) + "\n" for r, m in zip(rows, marks)))
    fd = _load(path, membership_column="seen", train_per_client=30, test_per_client=8)
    mark = {f"row{i}": m for i, m in enumerate(marks)}
    assert all(mark[r.id] == "train" for c in fd.clients for r in c.train)
    assert all(mark[r.id] == "test" for c in fd.clients for r in c.test)
    assert set(fd.ground_truth["public"]["row_ids"]) == {i for i, m in mark.items() if m == "public"}
    assert fd.ground_truth["membership"] == {"source": "column", "column": "seen"}
    assert _load(path).ground_truth["membership"] == {"source": "split", "seed": 0}
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps({**r, "seen": "maybe" if i == 7 else m}) + "\n"
                           for i, (r, m) in enumerate(zip(rows, marks))))
    with pytest.raises(ValueError, match="row 7 holds 'maybe'"):
        _load(bad, membership_column="seen", train_per_client=30, test_per_client=8)
    with pytest.raises(ValueError, match="fewer than data.test_per_client = 60"):
        _load(path, membership_column="seen", train_per_client=30, test_per_client=60)


def test_processes_sharing_a_cache_build_the_tiny_base_once(tmp_path):
    """A second builder of the same entry waits for the first and takes what it built: here the entry the lock's
    holder writes (its weights marked) is what the waiting builder loads, where without the lock it would pretrain
    its own and put it in the entry's place."""
    import shutil
    import threading
    import time
    from pathlib import Path

    from safetensors.torch import load_file, save_file

    import fedmem.engine.model.tiny as tiny
    from fedmem.common.cache import building
    from fedmem.data.synthetic import make_public_corpus
    from fedmem.engine.config import TinyModelConfig

    cfg = TinyModelConfig(vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    corpus = make_public_corpus(0, 60, 0.3, 0.25)[0]
    first = Path(tiny.load_or_build_tiny(cfg, corpus, 0, str(tmp_path / "first"), progress=False)[2])
    target = tmp_path / "shared" / first.name
    loaded = {}
    with building(target):
        waiter = threading.Thread(target=lambda: loaded.setdefault(
            "model", tiny.load_or_build_tiny(cfg, corpus, 0, str(tmp_path / "shared"), progress=False)[0]))
        waiter.start()
        time.sleep(1.0)  # the waiter reaches the lock (its key is a hash of the corpus) and waits there
        shutil.copytree(first, target)
        weights = load_file(str(target / "model.safetensors"))
        save_file({k: v * 0 for k, v in weights.items()}, str(target / "model.safetensors"),
                  metadata={"format": "pt"})  # the mark: no pretraining ends at all zeros
    waiter.join()
    assert all(not p.any() for p in loaded["model"].parameters())
