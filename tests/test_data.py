"""Data layer: templates, the synthetic source and its ground truth, loaders on local files, partitioners."""

import json

import pandas as pd
import pytest

from fedmem.data import (
    DataConfig,
    TaskConfig,
    check_configs,
    format_example,
    format_prompt,
    load_federated,
)
from fedmem.data.partition import dirichlet, iid, natural
from fedmem.data.synthetic import check_ground_truth
from fedmem.data.templates import TEMPLATES


def test_templates_are_the_papers():
    assert TEMPLATES["summarization"].user == "Please summarize the following abstract into a title. {abstract}"
    assert TEMPLATES["dialog"].user == (
        "If you are a doctor, please answer the medical questions based on the patient's description. {patient}")
    assert TEMPLATES["qa"].user == "{question} {context}"
    assert TEMPLATES["classification"].user.startswith(
        "Please classify the following passage into one of the following categories: BACKGROUND, OBJECTIVE, METHODS,")
    assert {t: TEMPLATES[t].mem_field for t in TEMPLATES} == {
        "summarization": "abstract", "dialog": "patient", "qa": "context", "classification": "passage", "text": "text"}


def small(**kw):
    base = dict(train_per_client=40, test_per_client=8, canary_copies=[1, 2, 4], shared_canary_copies=[],
                public_size=60, audit_canaries=0)  # the generator's own records (test_one_run.py plants the others)
    return DataConfig(**{**base, **kw})


def test_synthetic_ground_truth_matches_the_data():
    fd = load_federated(TaskConfig(), small(), seed=3)
    check_ground_truth(fd)  # every canary exactly in its client, with its copies, never in the public corpus
    canaries = fd.ground_truth["canaries"]
    assert len(canaries) == 3 * 3 and {k["copies"] for k in canaries} == {1, 2, 4}
    for c, split in enumerate(fd.clients):
        assert len(split.train) == 40 and len(split.test) == 8
        mine = [k for k in canaries if k["client"] == c]
        assert sum(r.tags.get("canary") is not None for r in split.train) == sum(k["copies"] for k in mine)
        assert not any("canary" in r.tags for r in split.test)
        for r in split.train + split.test:
            assert r.mem_text in r.user  # the memorization text is inside the user turn
    # the shared boilerplate is used by every client
    for c, split in enumerate(fd.clients):
        assert any(r.tags.get("generic") for r in split.train), c
    boiler = fd.ground_truth["boilerplate"]
    assert all(any(b["text"] in t for t in fd.public_corpus) for b in boiler)


def test_synthetic_is_seeded():
    a, b, c = (load_federated(TaskConfig(), small(), seed=s) for s in (1, 1, 2))
    assert [r.user for r in a.clients[0].train] == [r.user for r in b.clients[0].train]
    assert [r.user for r in a.clients[0].train] != [r.user for r in c.clients[0].train]


def test_check_ground_truth_catches_a_mismatch():
    fd = load_federated(TaskConfig(), small(), seed=0)
    fd.ground_truth["canaries"][0]["copies"] += 1
    fd.ground_truth["canaries"][0]["record_ids"].append("c9-train-0")
    with pytest.raises(AssertionError, match="canary"):
        check_ground_truth(fd)


def test_partitioners_keep_every_sample_exactly_once():
    n = 101
    parts = iid(n, 3, seed=0)
    assert sorted(i for p in parts for i in p) == list(range(n)) and all(parts)
    labels = [["A", "B", "C", "D"][i % 4] for i in range(n)]
    parts = dirichlet(labels, 3, alpha=5.0, seed=0)
    assert sorted(i for p in parts for i in p) == list(range(n))
    assert parts == dirichlet(labels, 3, alpha=5.0, seed=0)
    groups = [["x", "y", "z"][i % 3] for i in range(n)]
    parts = natural(groups, 3)
    assert sorted(i for p in parts for i in p) == list(range(n))
    assert all(len({groups[i] for i in p}) == 1 for p in parts)
    with pytest.raises(ValueError, match="client groups"):
        natural(groups, 2)


def _hub_rows(n=30):
    cats = ["astro-ph.GA", "cond-mat.str-el", "math.AG"]
    return [{"abstract": f"We study system {i} with method {i % 7}. " * 3, "title": f"On system {i}",
             "categories": cats[i % 3]} for i in range(n)]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_summarization_loader_on_local_files_in_hub_schema(tmp_path, suffix):
    rows = _hub_rows()
    path = tmp_path / f"arxiv{suffix}"
    df = pd.DataFrame(rows)
    if suffix == ".jsonl":
        path.write_text("\n".join(json.dumps(r) for r in rows))
    elif suffix == ".csv":
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path)
    task = TaskConfig(name="summarization", columns={"abstract": "abstract", "title": "title"},
                      client_column="categories", client_groups={"0": ["astro-ph"], "1": ["cond-mat"], "2": ["math."]},
                      pearl_metric="rouge_l")
    fd = load_federated(task, DataConfig(source="local", path=str(path), train_per_client=8, test_per_client=2,
                                                   public_share=0.0), 0)
    assert [len(c.train) for c in fd.clients] == [8, 8, 8]
    for c, split in enumerate(fd.clients):
        for r in split.train + split.test:
            assert r.user.startswith("Please summarize the following abstract into a title. ")
            assert r.assistant.startswith("On system") and r.mem_text in r.user
            assert int(r.assistant.split()[-1]) % 3 == c  # natural partition by category group


def test_qa_loader_reads_nested_columns(tmp_path):
    rows = [{"question": f"Does drug {i} help?", "context": {"contexts": [f"Trial {i} part one.", "Part two."],
             "meshes": [["Neoplasms"], ["Heart Diseases"], ["Bacterial Infections"]][i % 3]},
             "long_answer": f"Answer {i}."} for i in range(24)]
    path = tmp_path / "pubmedqa.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    task = TaskConfig(name="qa", columns={"question": "question", "context": "context.contexts", "answer": "long_answer"},
                      client_column="context.meshes",  # MeSH terms are matched whole (group_by=tags)
                      client_groups={"0": ["Neoplasms"], "1": ["Heart Diseases"], "2": ["Bacterial Infections"]})
    fd = load_federated(task, DataConfig(source="local", path=str(path), train_per_client=6, test_per_client=2,
                                                   public_share=0.0), 0)
    r = fd.clients[0].train[0]
    assert r.mem_text.startswith("Trial") and r.mem_text.endswith("Part two.") and r.user.endswith(r.mem_text)


def test_classification_loader_dirichlet_and_labels(tmp_path):
    labels = ["BACKGROUND", "OBJECTIVE", "METHODS", "RESULTS", "CONCLUSIONS"]
    df = pd.DataFrame({"text": [f"Sentence {i} of an abstract." for i in range(100)],
                       "label": [labels[i % 5] for i in range(100)]})
    path = tmp_path / "rct.csv"
    df.to_csv(path, index=False)
    task = TaskConfig(name="classification", columns={"passage": "text", "label": "label"}, label_column="label",
                      partition="dirichlet", metric="accuracy")
    fd = load_federated(task, DataConfig(source="local", path=str(path), train_per_client=20, test_per_client=3), 0)
    for split in fd.clients:
        for r in split.train:
            assert r.assistant == r.label and r.label in labels


def test_hub_loader_fails_with_one_clear_message(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    task = TaskConfig(name="qa", hf_dataset="nobody/no-such-dataset-fedmem", client_column="x")
    with pytest.raises(RuntimeError, match="data.path"):
        load_federated(task, DataConfig(source="hf"), 0)


@pytest.mark.parametrize("kw, msg", [({"num_clients": 0}, "num_clients"), ({"source": "s3"}, "data.source"),
                                     ({"source": "local"}, "data.path")])
def test_invalid_data_config(kw, msg):
    with pytest.raises(ValueError, match=msg):
        DataConfig(**kw)


def test_invalid_task_config():
    with pytest.raises(ValueError, match="task.name"):
        TaskConfig(name="translation")
    with pytest.raises(ValueError, match="dirichlet"):  # a Dirichlet split needs a label column (task or data)
        check_configs(TaskConfig(partition="dirichlet"), DataConfig(source="hf"))


def test_missing_column_is_named(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"input": "a", "reply": "b", "grp": "g"}))
    task = TaskConfig(name="dialog", columns={"patient": "input", "doctor": "output"}, client_column="grp")
    with pytest.raises(ValueError, match="output"):
        load_federated(task, DataConfig(source="local", path=str(path), num_clients=1, train_per_client=1,
                                        test_per_client=1), 0)


class _Plain:
    chat_template = None
    eos_token = "</s>"


def test_chat_formatting_with_and_without_template():
    plain = _Plain()
    assert format_prompt(plain, "hi") == "User: hi\nAssistant:"
    assert format_example(plain, "hi", "yo") == "User: hi\nAssistant: yo</s>"
    from fedmem.engine.model.tiny import train_tokenizer

    tok = train_tokenizer(["hello world"] * 20, 300)
    p = format_prompt(tok, "hi")
    assert p.endswith("<|im_start|>assistant\n") and "hi" in p
    assert format_example(tok, "hi", "yo").startswith(p.rsplit("<|im_start|>assistant", 1)[0])
