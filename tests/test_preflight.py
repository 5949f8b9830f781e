"""Bad input stops `fedmem run` before any run directory exists or Ray starts, with one line naming the problem."""

import json

import pytest

from bench.references import english_passages
from fedmem.cli import run_experiment
from fedmem.config.compose import compose_dict
from tests.conftest import FAST

LOCAL_FAST = [o for o in FAST if not o.startswith(("data.public_size", "data.canary", "data.shared"))]


def _rows(n=60):
    return [{"text": t, "section": ["a", "b"][i % 2]} for i, t in enumerate(english_passages(60, 60)[:n])]


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(tmp_path, cache_dir, path, *extra):
    d = compose_dict([*LOCAL_FAST, f"cache_dir={cache_dir}", "task=text", "data=local", f"data.path={path}",
                      "data.client_column=section", "data.train_per_client=20", "data.test_per_client=4", *extra])
    run_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as info:
        run_experiment(d, str(run_dir))
    assert info.value.code == 2
    assert not run_dir.exists()  # nothing half-written
    return run_dir


def _cases(tmp_path):
    good = _write_jsonl(tmp_path / "good.jsonl", _rows())
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\x00\xff\xfe\x89PNG\r\n" * 50)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(good.read_text() + '{"text": "unterminated\n')
    empty_text = _write_jsonl(tmp_path / "empty_text.jsonl",
                              [{**r, "text": r["text"] if r["section"] == "a" else "  "} for r in _rows()])
    lonely = _write_jsonl(tmp_path / "lonely.jsonl", _rows() + [{"text": "One row.", "section": "c"}])
    dup_ids = _write_jsonl(tmp_path / "dup_ids.jsonl",
                           [{**r, "id": f"n{min(i, 40)}"} for i, r in enumerate(_rows())])  # rows 40 and 41 share
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "header.csv").write_text("text,section\n")
    return {
        "missing file": ([str(tmp_path / "nope.jsonl")], "names no readable"),
        "empty file": ([str(tmp_path / "empty.jsonl")], "empty.jsonl"),
        "header-only CSV": ([str(tmp_path / "header.csv")], "header.csv"),
        "binary file": ([str(binary)], "binary.jsonl' is not UTF-8 text"),
        "malformed JSONL line": ([str(broken)], "broken.jsonl' line 61 is not JSON"),
        "missing text column": ([str(good), "data.columns={text:body}"], "column 'body' not found"),
        "missing client column": ([str(good), "data.client_column=site"], "column 'site' not found"),
        "empty texts empty a client": ([str(empty_text)], "distinct values ['a']"),
        "a client with one row": ([str(lonely), "data.num_clients=3"], "client 'c'"),
        "prefix longer than every sample": ([str(good), "audit.prefix_len=400",
                                             "model.max_seq_len=auto"],
                                            "client 'a' has no train text of at least audit.prefix_len + 20 = 420 "
                                            "tokens: lower audit.prefix_len"),
        "more CPUs than the machine": ([str(good), "simulation.num_cpus_per_client=512"],
                                       "simulation.num_cpus_per_client=512 but this machine has"),
        "a Ray cluster address where nothing listens": ([str(good), "simulation.ray_address=127.0.0.1:9"],
                                                        "simulation.ray_address=127.0.0.1:9: no Ray cluster answers"),
        "bad number": ([str(good), "train.lr=abc"], "train.lr must be a finite number"),
        "duplicate ids": ([str(dup_ids), "data.id_column=id"],
                          "data.id_column='id': id 'n40' appears in rows 40 and 41 of"),
        "an id column that does not exist": ([str(good), "data.id_column=id"], "column 'id' not found"),
        "an unreachable Elasticsearch": ([str(good), "audit.methods=[mr]", "audit.mr.index.backend=elasticsearch",
                                          "audit.mr.index.es_url=http://127.0.0.1:9"],
                                         "Elasticsearch at http://127.0.0.1:9 is unreachable"),
        "a model directory that does not exist": ([str(good), "model.name=qwen2.5-0.5b", "experiment=paper",
                                                   f"model.path={tmp_path / 'no-model'}"],
                                                  "no-model: no such directory"),
    }


def test_every_bad_input_is_one_line_before_the_run_directory(tmp_path, cache_dir, capsys):
    failures = []
    for case, (args, message) in _cases(tmp_path).items():
        _run(tmp_path, cache_dir, *args)
        err = capsys.readouterr().err.strip()
        last = err.splitlines()[-1] if err else ""  # libraries' progress bars may come before it
        if not last.startswith("fedmem: ") or message not in last or "Traceback" in err:
            failures.append(f"{case}: {err!r}")
    assert not failures, "\n".join(failures)


def test_preflight_summary_names_clients_sizes_and_audit_work(cache_dir):
    from fedmem.config.experiment import from_dict
    from fedmem.experiment.preflight import preflight

    d = compose_dict([*FAST, f"cache_dir={cache_dir}", "audit.methods=[utility,mr,pa]"])
    summary = preflight(from_dict(d))
    assert "2 clients (train/test: cardiology 24/6, dermatology 24/6)" in summary
    assert "1 round of fedavg" in summary and "(2 rounds audited)" in summary
    # (audit.mr.n=6 + audit.mr.heldout=3) prefixes x 2 clients, each queried against both clients' indexes, top 10
    # and the next one (the own record left out), and typed against its own record
    assert ("mr: 18 generations (6 of them the held-out control) and one per planted canary, 36 index queries, up "
            "to 414 detector pairs") in summary
    assert "utility: 4 greedy generations" in summary and "pa: 12 suffixes scored under 64 prior prefixes" in summary


def test_an_id_column_names_the_records_and_the_ground_truth(tmp_path, cache_dir):
    from fedmem.config.experiment import from_dict
    from fedmem.data import load_federated

    path = _write_jsonl(tmp_path / "ids.jsonl", [{**r, "id": f"note-{i}"} for i, r in enumerate(_rows())])
    d = compose_dict([*LOCAL_FAST, f"cache_dir={cache_dir}", "task=text", "data=local", f"data.path={path}",
                      "data.client_column=section", "data.train_per_client=20", "data.test_per_client=4",
                      "data.id_column=id"])
    cfg = from_dict({**d, "run_dir": str(tmp_path / "run")})
    data = load_federated(cfg.task, cfg.data, seed=cfg.seed, cache_dir=cfg.cache_dir)
    train_ids = [r.id for c in data.clients for r in c.train]
    assert all(i.startswith("note-") for i in train_ids) and len(set(train_ids)) == len(train_ids)
    assert data.ground_truth["clients"][0]["train_ids"] == [r.id for r in data.clients[0].train]
    rows = _rows()
    for r in data.clients[1].test:
        assert r.mem_text.strip() in rows[int(r.id.removeprefix("note-"))]["text"]  # the id points at its own row


def test_data_check_prints_the_floor_and_the_shared_passages(cache_dir, capsys):
    """`fedmem data check`: the data's floor and its shared passages before any training, with the run's overrides;
    nothing written. The boilerplate closings all clients share are found as shared passages."""
    from fedmem.cli import main

    main(["data", "check", *FAST, f"cache_dir={cache_dir}", "audit.methods=[utility,mr]", "data.generic_fraction=0.5",
          "audit.reveal_text=true"])
    out = capsys.readouterr().out
    assert out.startswith("2 clients (train/test records: cardiology 24/6, dermatology 24/6)")
    assert "MR's floor: 3 held-out texts per client" in out and "against 6 training suffixes per client" in out
    assert "Held-out texts left out as training text (" in out and "): cardiology 0, dermatology 0" in out
    floor = [line for line in out.splitlines() if line.startswith("  all text: MR_Intra ")]
    assert len(floor) == 1 and "MR_Inter" in floor[0] and "MR_Total" in floor[0]
    assert "  distinctive text: MR_Intra " in out
    # a boilerplate closing, held by both clients (and the public share, whose paragraphs end in it too)
    assert "suffixes, clients cardiology,dermatology" in out


def test_data_check_refuses_a_bad_override_in_one_line(cache_dir, capsys):
    from fedmem.cli import main

    with pytest.raises(SystemExit) as e:
        main(["data", "check", *FAST, f"cache_dir={cache_dir}", "audit.mr.heldout=-1"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["fedmem: invalid configuration: audit.mr.heldout must be >= 0 or null, got -1"]
