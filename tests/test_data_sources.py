"""The Hugging Face loaders of the four tasks, run through ``datasets.load_dataset`` on local fixtures in the hub
schemas (tests/fixtures/make_fixtures.py), and the local-file source with a column mapping."""

import json
import os
import shutil
import warnings
from pathlib import Path

import pytest

from fedmem.data import (
    DataConfig,
    DatasetUnavailableError,
    TaskConfig,
    load_federated,
    read_ground_truth,
)
from fedmem.data.tasks import RCT_LABELS
from tests.fixtures.make_fixtures import EXPECTED

FIX = Path(__file__).resolve().parent / "fixtures"
FILES = {
    "summarization": ("arxiv.jsonl", "arxiv"),
    "dialog": ("healthcaremagic.parquet", "healthcaremagic"),
    "qa": ("pubmedqa.jsonl", "pubmedqa"),
    "classification": ("pubmed_rct.csv", "pubmed_rct"),
}


def _rows(name: str) -> list[dict]:
    """The fixture's rows in file order (row i is record id ``row{i}``), read without fedmem."""
    import pandas as pd

    path = FIX / name
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines()]
    if path.suffix == ".parquet":
        return pd.read_parquet(path).to_dict("records")
    return pd.read_csv(path).to_dict("records")


def _load(task: str, tmp_path, seed: int = 0, **data):
    # No public share by default: these tests check the paper's partitions row by row (test_public_corpus.py
    # covers the share).
    kw = {"source": "hf", "path": str(FIX / FILES[task][0]), "train_per_client": 9, "test_per_client": 3,
          "public_share": 0.0, **data}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        return load_federated(TaskConfig(name=task), DataConfig(**kw), seed=seed, cache_dir=str(tmp_path / "cache"))


def _check_records(fd, task: str):
    cfg = TaskConfig(name=task)
    head = cfg.user_template.split("{")[0]
    ids = set()
    for c, split, r in fd.all_records():
        assert r.client == c and r.id not in ids
        ids.add(r.id)
        assert r.mem_text and r.mem_text in r.user and r.user.startswith(head)
        for text in (r.user, r.assistant):
            assert "\n" not in text and "  " not in text and text == text.strip()


@pytest.mark.parametrize("task", ["summarization", "dialog", "qa"])
def test_natural_loader_puts_each_row_in_its_papers_group(task, tmp_path):
    fd = _load(task, tmp_path)
    exp = EXPECTED[FILES[task][1]]
    truth = fd.ground_truth
    assert [c["rows_in_partition"] for c in truth["clients"]] == exp["groups"]
    assert truth["rows_in_no_client"] == exp["left_out"]
    assert [(len(c.train), len(c.test)) for c in fd.clients] == [(9, 3)] * 3
    _check_records(fd, task)
    rows = _rows(FILES[task][0])
    for c, _, r in fd.all_records():
        row = rows[int(r.id[3:])]
        if task == "summarization":
            cats = " ".join(row["categories"]).split()
            prefix = ["astro-ph", "cond-mat", "math"][c]
            assert any(x.startswith(prefix) for x in cats) and r.mem_text == " ".join(row["abstract"].split())
            assert r.assistant == " ".join(row["title"].split())
        elif task == "dialog":
            assert f"Ref group{c + 1}-" in r.assistant and r.mem_text == " ".join(row["input"].split())
        else:
            meshes = set(row["context"]["meshes"])
            assert ("Humans" in meshes, "Animals" in meshes, "Middle Aged" in meshes) == [
                (False, True, False), (True, False, True), (True, False, False)][c]
            assert r.mem_text == " ".join(" ".join(row["context"]["contexts"]).split())
            assert r.user == f"{row['question']} {r.mem_text}" and r.assistant == row["long_answer"]


def test_classification_loader_dirichlet_over_the_label(tmp_path):
    fd = _load("classification", tmp_path, train_per_client=8, test_per_client=2)
    truth = fd.ground_truth
    assert truth["partition"] == "dirichlet" and truth["dirichlet_alpha"] == 5.0
    assert sum(c["rows_in_partition"] for c in truth["clients"]) == EXPECTED["pubmed_rct"]["rows"]
    assert truth["rows_in_no_client"] == 0
    _check_records(fd, "classification")
    rows = _rows("pubmed_rct.csv")
    for _, _, r in fd.all_records():
        assert r.label in RCT_LABELS and r.assistant == r.label
        assert r.label == rows[int(r.id[3:])]["label"].upper()  # hub labels are lower case


def test_same_seed_same_split_other_seed_other_split(tmp_path):
    a, b = _load("qa", tmp_path), _load("qa", tmp_path / "b")
    c = _load("qa", tmp_path / "c", seed=1)
    ids = lambda fd: [[r.id for r in s.train + s.test] for s in fd.clients]  # noqa: E731
    assert ids(a) == ids(b) and a.ground_truth == b.ground_truth
    assert ids(a) != ids(c)
    train = lambda fd: [sorted(r.id for r in s.train) for s in fd.clients]  # noqa: E731
    assert train(a) != train(c)  # another train/test split, not just another order


def test_loader_saves_ground_truth_next_to_the_data(tmp_path):
    fd = _load("summarization", tmp_path)
    saved = Path(fd.saved_to)
    assert read_ground_truth(saved) == json.loads(json.dumps(fd.ground_truth))
    lines = [json.loads(x) for x in (saved / "records.jsonl").read_text().splitlines()]
    assert [x["id"] for x in lines] == [r.id for _, _, r in fd.all_records()]


def test_local_source_with_column_mapping_and_client_column(tmp_path):
    data = DataConfig(source="local", path=str(FIX / "clinic_notes.csv"), num_clients=2, train_per_client=7,
                      test_per_client=3, columns={"patient": "question_text", "doctor": "answer_text"},
                      client_column="site", public_share=0.0)
    fd = load_federated(TaskConfig(name="dialog"), data, seed=0)
    assert [c["name"] for c in fd.ground_truth["clients"]] == ["north", "south"]
    for c, _, r in fd.all_records():
        assert f"at the {['north', 'south'][c]} site" in r.mem_text and r.user.startswith("If you are a doctor")
    # the same file without a client column: an IID split over all rows
    iid = load_federated(TaskConfig(name="dialog", partition="iid"),
                         DataConfig(source="local", path=str(FIX / "clinic_notes.csv"), num_clients=2,
                                    train_per_client=8, test_per_client=2, public_share=0.0,
                                    columns={"patient": "question_text", "doctor": "answer_text"}), seed=0)
    assert sum(len(c.train) + len(c.test) for c in iid.clients) == 20


def test_local_source_reads_a_directory_or_a_glob(tmp_path):
    d = tmp_path / "files"
    d.mkdir()
    shutil.copy(FIX / "pubmedqa.jsonl", d / "part-0.jsonl")
    for path in (str(d), str(d / "*.jsonl")):
        fd = _load("qa", tmp_path, path=path)
        assert [c["rows_in_partition"] for c in fd.ground_truth["clients"]] == EXPECTED["pubmedqa"]["groups"]


def test_missing_column_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"data.columns.abstract: column 'abstract_text' not found "
                                         r"\(task=summarization's field\); the data has columns \[.*'abstract'"):
        _load("summarization", tmp_path, columns={"abstract": "abstract_text"})
    with pytest.raises(ValueError, match="column 'site' not found"):
        _load("dialog", tmp_path, client_column="site")


def test_unknown_label_is_one_clear_error(tmp_path):
    task = TaskConfig(name="classification", labels=["BACKGROUND", "METHODS"], metric="accuracy")
    with pytest.raises(ValueError, match=r"task.labels .* does not contain the label\(s\) \['conclusions'"):
        load_federated(task, DataConfig(source="hf", path=str(FIX / "pubmed_rct.csv")), seed=0)


def test_small_partitions_are_one_error_naming_every_short_client_and_sizes_that_fit(tmp_path):
    with pytest.raises(ValueError, match=r"^data.train_per_client \+ data.test_per_client = 500 \+ 100, but client "
                                         r"'\w+' owns \d+ rows, client '\w+' owns \d+ rows, client '\w+' owns \d+ rows: "
                                         r"set data.train_per_client=\d+ data.test_per_client=\d+ \(the fewest rows, "
                                         r"split as asked\)$"):
        load_federated(TaskConfig(name="qa"), DataConfig(source="hf", path=str(FIX / "pubmedqa.jsonl"),
                                                         train_per_client=500, test_per_client=100,
                                                         public_share=0.0), seed=0)


def test_hub_failure_is_one_clear_error_that_says_how_to_use_local_files(tmp_path):
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # set by conftest: nothing may download during tests
    task = TaskConfig(name="qa", hf_dataset="fedmem-tests/no-such-dataset")
    with pytest.raises(DatasetUnavailableError) as info:
        load_federated(task, DataConfig(source="hf"), seed=0, cache_dir=str(tmp_path))
    msg = str(info.value)
    assert "could not download the Hugging Face dataset 'fedmem-tests/no-such-dataset'" in msg
    assert "data.path=" in msg and "data=synthetic" in msg


def test_unreadable_path_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="names no readable"):
        load_federated(TaskConfig(name="qa"), DataConfig(source="hf", path=str(tmp_path / "nope.jsonl")), seed=0)


@pytest.mark.parametrize("name", ["rows.jsonl", "rows.csv", "rows.parquet"])
def test_an_empty_file_is_named_as_empty(tmp_path, name):
    (tmp_path / name).write_bytes(b"")
    with pytest.raises(ValueError, match=rf"^data.path '.*{name}': .*{name} is empty \(0 bytes\)$"):
        load_federated(TaskConfig(name="qa"), DataConfig(source="hf", path=str(tmp_path / name)), seed=0)


def test_hydra_overrides_reach_the_local_loader(tmp_path):
    """The command in conf/data/local.yaml, composed as the CLI does: column mapping and client column."""
    from fedmem.config.compose import compose_dict

    d = compose_dict(["data=local", f"data.path={FIX / 'clinic_notes.csv'}", "data.num_clients=2",
                      "data.columns={patient:question_text,doctor:answer_text}", "data.client_column=site",
                      "data.train_per_client=8", "data.test_per_client=2", "data.public_share=0"])
    fd = load_federated(TaskConfig(**d["task"]), DataConfig(**d["data"]), seed=0)
    assert [c["name"] for c in fd.ground_truth["clients"]] == ["north", "south"]
    assert fd.clients[0].train[0].mem_text.startswith("Patient ")
    with pytest.raises(ValueError, match="needs data.path"):
        DataConfig(**compose_dict(["data=local"])["data"])  # the mandatory ??? left unset
