"""`fedmem audit`: re-auditing a run's saved rounds (exactly, and with other audit settings, without training), an
external model and adapter on local data, and refused input that leaves nothing behind."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fedmem.cli import main, run_experiment
from fedmem.config.compose import compose_dict
from tests.conftest import FAST
from tests.helpers import CHROMIUM, rendered_text

METHODS = ["audit.methods=[utility,mr,pa]", "audit.mr.detector.ner_workers=0"]
# FAST without the synthetic source's own keys (a local source has none of them)
FAST_LOCAL = [o for o in FAST if not o.startswith("data.") or o.split("=")[0] in (
    "data.num_clients", "data.train_per_client", "data.test_per_client")]


def _audit_sections(report: dict) -> dict:
    """The figures of a round report (timings, which differ between any two runs, are kept apart from them)."""
    return report["audit"]


def _digest(run: Path) -> dict[str, str]:
    return {str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file() and "audits" not in p.parts}


@pytest.fixture(scope="module")
def trained(tmp_path_factory, cache_dir):
    """A centrally trained tiny run of one epoch (rounds 0 and 1 saved) with MR, PA and utility audited."""
    run_dir = tmp_path_factory.mktemp("trained")
    d = compose_dict([*FAST, f"cache_dir={cache_dir}", "strategy=centralized", *METHODS])
    return run_experiment(d, str(run_dir))


def test_reaudit_with_the_runs_own_settings_reproduces_its_figures(trained, capsys):
    main(["audit", f"run={trained}", "name=same"])
    out = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert out == trained / "audits" / "same"
    for r in (0, 1):
        original = json.loads((trained / f"round_{r}" / "report.json").read_text())
        again = json.loads((out / f"round_{r}" / "report.json").read_text())
        assert _audit_sections(again) == _audit_sections(original)
        assert again["source"]["kind"] == "reaudit" and again["train"] == original["train"]
        assert not (out / f"round_{r}" / "adapter").exists()  # the saved adapters stay where they are


def test_rounds_last_audits_the_runs_last_saved_round_alone(trained, capsys):
    main(["audit", f"run={trained}", "rounds=last", "audit.methods=[utility]", "name=last"])
    out = trained / "audits" / "last"
    assert sorted(p.name for p in out.glob("round_*")) == ["round_1"]
    assert json.loads((out / "round_1" / "report.json").read_text())["round"] == 1


def test_reaudit_with_a_new_prefix_length_trains_nothing(trained, capsys, monkeypatch):
    import fedmem.engine.train
    import fedmem.experiment.training
    import server.simulation

    def no_training(*args, **kwargs):
        raise AssertionError("a re-audit must not train")

    for module, name in ((fedmem.experiment.training, "train_local"), (fedmem.engine.train, "train_local"),
                         (fedmem.experiment.training, "client_round"), (server.simulation, "simulate")):
        monkeypatch.setattr(module, name, no_training)
    before = _digest(trained)
    main(["audit", f"run={trained}", "audit.prefix_len=10", "audit/decoding=greedy"])
    out = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert out.name == "prefix_len=10,decoding=greedy" and out.parent == trained / "audits"
    for r in (0, 1):
        report = json.loads((out / f"round_{r}" / "report.json").read_text())
        assert report["config"]["audit"]["prefix_len"] == 10
        assert report["config"]["audit"]["decoding"]["strategy"] == "greedy"
        assert report["source"]["overrides"] == ["audit.prefix_len=10", "audit/decoding=greedy"]
        assert set(report["audit"]) >= {"utility", "mr", "pa"} and report["audit"]["mr"]["n"] == [6, 6]
        assert (out / f"round_{r}" / "report.html").exists()
    assert (out / "summary.json").exists() and (out / "config.yaml").exists()
    assert _digest(trained) == before  # the training run's own files are untouched


def test_reaudit_sweep_writes_audit_only_tables(trained, capsys):
    main(["audit", "-m", f"run={trained}", "rounds=1", "name=sweep", "audit.methods=[utility,mr]",
          "audit.prefix_len=8,12"])
    sweep = trained / "audits" / "sweep"
    report = (sweep / "sweep_report.md").read_text()
    assert "Audit only" in report and "## Prefix length (paper Table 4)" in report
    rows = json.loads((sweep / "sweep_tables.json").read_text())["tables"]["prefix_len"]["rows"]
    assert [r["key"] for r in rows] == [{"prefix_len": 8}, {"prefix_len": 12}]
    for i, row in enumerate(rows):
        summary = json.loads((sweep / str(i) / "summary.json").read_text())
        assert summary["rounds"] == [1] and row["runs"] == [str(i)]
        final = summary["curves"]["mr/intra"][-1][1]
        assert row["figures"]["mr/intra"]["mean"] == pytest.approx(final)


def test_an_experiment_preset_restores_its_rules_over_the_runs_resolved_ones(trained):
    from fedmem.experiment.reaudit import prepare_reaudit

    cfg, rounds, _ = prepare_reaudit(str(trained), ["experiment=paper"], None)
    assert cfg.experiment == "paper" and rounds == [0, 1]
    assert cfg.audit.sections["pa"].generic_source == "appendix_b"  # the run itself used offline_demo's public


@pytest.mark.parametrize("override, message", [
    ("train.lr=0.1", "train.lr: shaped training"),
    ("data.num_clients=3", "data.num_clients: shaped training"),
    ("model.lora_r=4", "model.lora_r: shaped training"),
    ("strategy.num_rounds=5", "strategy.num_rounds: shaped training"),
    ("seed=3", "seed: shaped training"),
    ("task=qa", "task: shaped training"),
    ("audit.prefix_len=0", "audit.prefix_len must be >= 1"),
    ("audit/decoding=beam", "audit/decoding=beam: no such preset"),
    ("rounds=7", "round(s) [7] have no saved adapter"),
])
def test_refused_overrides_name_the_key_and_leave_nothing_behind(trained, capsys, override, message):
    before = _digest(trained)
    with pytest.raises(SystemExit) as info:
        main(["audit", f"run={trained}", override, "name=refused"])
    assert info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (trained / "audits" / "refused").exists() and _digest(trained) == before


def test_a_prefix_longer_than_the_data_allows_is_refused_before_writing(trained, capsys):
    with pytest.raises(SystemExit) as info:
        main(["audit", f"run={trained}", "audit.prefix_len=250", "name=too_long"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and ("audit.samples_per_client=6: client 'cardiology' has no train text of at least "
                                      "audit.prefix_len + 20 = 270 tokens") in err
    assert not (trained / "audits" / "too_long").exists()


def test_a_sweep_checks_every_jobs_sample_pool_before_the_first_job_runs(trained, capsys):
    with pytest.raises(SystemExit) as info:
        main(["audit", "-m", f"run={trained}", "name=sweep_bad", "audit.methods=[utility,mr]",
              "audit.prefix_len=8,250"])
    assert info.value.code == 2 and "at least audit.prefix_len + 20 = 270 tokens" in capsys.readouterr().err
    assert not (trained / "audits" / "sweep_bad").exists()


def _external_model(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A tiny model and a LoRA adapter saved with save_pretrained, and a local JSONL of two sites' records."""
    import torch
    from helpers import texts, tiny_model, tiny_tokenizer
    from peft import LoraConfig, get_peft_model

    tok = tiny_tokenizer()
    base = tiny_model(tok, seed=3)
    base.save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    lora = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)  # a trained-looking adapter: its B matrices are not zero
    lora.save_pretrained(tmp_path / "adapter")
    rows = [{"text": t, "reply": "Thank you for the note.", "site": site, "seen": "test" if i % 4 == 0 else "train"}
            for site, seed in (("north", 1), ("south", 2)) for i, t in enumerate(texts(40, seed=seed))]
    data = tmp_path / "records.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "model", tmp_path / "adapter", data


def test_external_model_and_adapter_on_local_data(tmp_path, capsys, monkeypatch, cache_dir):
    model, adapter, data = _external_model(tmp_path)
    monkeypatch.chdir(tmp_path)
    main(["audit", f"model.path={model}", f"model.adapter={adapter}", "task=dialog", "data=local",
          f"data.path={data}", "data.columns={patient:text,doctor:reply}", "data.client_column=site",
          *FAST_LOCAL, f"cache_dir={cache_dir}", "audit.methods=[utility,mr,pa,one_run]",
          "audit.mr.detector.ner_workers=0", "name=external"])
    out = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert out == Path("runs") / "external"
    report = json.loads((tmp_path / out / "round_0" / "report.json").read_text())
    src = report["source"]
    assert src["kind"] == "external" and src["model"] == str(model) and src["adapter"] == str(adapter)
    assert len(src["model_sha256"]) == 64 and src["adapter_sha256"] != src["model_sha256"]
    assert report["train"] == [] and report["experiment"] == "paper" and report["model"] == "model"
    assert report["audit"]["mr"]["clients"] == [0, 1] and report["audit"]["pa"]["overall"]["audited"] == 12
    md = (tmp_path / out / "round_0" / "report.md").read_text()
    assert f"Audit only: model `{model}`" in md and "adapter" in md
    assert md.startswith(f"# Audit of model `{model}` with adapter `{adapter}`, task dialog")
    # the run page describes an audit of this model: what was audited and how, no training to describe or redo
    page = (tmp_path / out / "report.md").read_text()
    assert page.startswith(f"# fedmem audit: model `{model}`, adapter `{adapter}`, task dialog")
    assert f"(sha256 {src['model_sha256'][:12]})" in page and f"(sha256 {src['adapter_sha256'][:12]})" in page
    assert "fedmem's own seeded split of the data" in page  # where membership came from
    assert "## What the audit finds" in page and "## The round's figures" in page
    # a figure that does not apply gives its reason, and a comparison with no planted truth is not drawn
    assert "**Record-level privacy audit in one run (audit canaries).** The data has no audit canaries" in page
    assert "n/a" not in page and "Against the planted truth" not in md and "## Agreement between methods" in md
    for trained_run in ("The answer at round", "fedmem run -m seed", "learning rate", "Run health", "FedAvg",
                        "Mean train loss", "Over rounds"):
        assert trained_run not in page, trained_run
    if CHROMIUM:  # the page as a reader sees it
        # the text without the space a removed code tag leaves before a comma or a bracket
        text = " ".join(rendered_text(tmp_path / out / "report.html").split()).replace(" ,", ",").replace(" (", "(")
        assert f"fedmem audit: model {model}, adapter {adapter}, task dialog" in text
        assert "What the audit finds" in text and f"adapter {adapter}(sha256 {src['adapter_sha256'][:12]})" in text
        assert "learning rate" not in text and "The answer at round" not in text


def test_membership_comes_from_the_data_when_fedmem_did_not_train_the_model(tmp_path, capsys, monkeypatch, cache_dir):
    """PEARL compares members with non-members: without the data's membership column an external audit of it is
    refused before anything is written; with it, the report says where membership came from."""
    model, adapter, data = _external_model(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["audit", f"model.path={model}", "task=dialog", "data=local", f"data.path={data}",
            "data.columns={patient:text,doctor:reply}", "data.client_column=site", *FAST_LOCAL,
            f"cache_dir={cache_dir}", "audit.methods=[utility,pearl]", "audit.pearl.n=2",
            "audit.pearl.samples_per_intensity=2"]
    with pytest.raises(SystemExit) as info:
        main([*args, "name=no_membership"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "audit.methods ['pearl'] compare" in err and "data.membership_column" in err
    assert not (tmp_path / "runs").exists()
    main([*args, "data.membership_column=seen", "name=with_membership"])
    report = json.loads((tmp_path / "runs" / "with_membership" / "round_0" / "report.json").read_text())
    assert report["source"]["membership"] == {"source": "column", "column": "seen"}
    assert report["audit"]["pearl"]["n_members"] > 0 and report["audit"]["pearl"]["n_nonmembers"] > 0
    md = (tmp_path / "runs" / "with_membership" / "round_0" / "report.md").read_text()
    assert "the data's column `seen`" in md


@pytest.mark.parametrize("args, message", [
    (["model.path=/no/such/dir"], "model.path=/no/such/dir: no such directory"),
    (["model.path={tmp}"], "not a Hugging Face model directory (no config.json)"),
    (["model.path={model}", "model.adapter={tmp}"], "not a peft adapter directory (no adapter_config.json)"),
    (["-m", "model.path={model}"], "-m and rounds= need run="),
])
def test_external_audit_refuses_what_is_not_a_local_model(tmp_path, capsys, monkeypatch, args, message):
    model, _, data = _external_model(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(tmp_path)
    args = [a.format(tmp=empty, model=model) for a in args]
    with pytest.raises(SystemExit) as info:
        main(["audit", *args, "data=local", f"data.path={data}", "data.client_column=site",
              "data.columns={patient:text,doctor:reply}"])
    assert info.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_study_preset_is_refused_as_a_re_audit_override():
    from fedmem.config import compose_over

    base = compose_dict(FAST)
    with pytest.raises(ValueError, match=r"experiment=paper_decoding: .* \(a study preset"):
        compose_over(base, ["experiment=paper_decoding"])
    over = compose_over(base, ["experiment=paper", "audit/decoding=greedy", "audit.prefix_len=10"])
    assert over["experiment"] == "paper" and over["audit"]["pa"]["generic_source"] == "appendix_b"  # preset applies
    assert over["audit"]["decoding"]["strategy"] == "greedy" and over["audit"]["prefix_len"] == 10
    assert {k: v for k, v in over.items() if k not in ("audit", "experiment")} == {
        k: v for k, v in base.items() if k not in ("audit", "experiment")}  # the saved run's training, untouched
