"""The insiders' attacks in whole runs: the server keeps each client's update (through the real Flower simulation)
only while asked, the run reports their disk cost, a re-audit of a run that kept them gives the run's figures, and a
run that did not, or a model fedmem did not train, is refused in one line."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from fedmem.cli import main, run_experiment
from fedmem.config.compose import compose_dict
from fedmem.config.experiment import from_dict, write_config
from fedmem.experiment.archive import RunArchive
from fedmem.experiment.auditor import training_auditor
from fedmem.experiment.training import client_round
from tests.conftest import FAST

INSIDERS = ["audit.methods=[sia,trajectory]", "audit.sia.n=3", "audit.sia.suffix_len=16", "audit.trajectory.n=3",
            "audit.trajectory.suffix_len=16"]


def _report(run: Path, r: int) -> dict:
    return json.loads((run / f"round_{r}" / "report.json").read_text())


@pytest.fixture(scope="module")
def kept(tmp_path_factory, cache_dir):
    """A FedAvg run of two clients and one round through the Flower simulation, every client's update kept."""
    d = compose_dict([*FAST, f"cache_dir={cache_dir}", *INSIDERS, "audit.keep_updates=true"])
    with contextlib.redirect_stderr(io.StringIO()):
        return run_experiment(d, str(tmp_path_factory.mktemp("kept")))


def test_the_server_keeps_each_clients_update_and_the_run_reports_their_disk_cost(kept):
    files = sorted((kept / "round_1" / "updates").glob("*.safetensors"))
    assert [f.name for f in files] == ["client_0.safetensors", "client_1.safetensors"]
    assert not (kept / "round_0" / "updates").exists()  # nothing was trained before round 0
    sia = _report(kept, 1)["audit"]["sia"]
    assert sia["updated"] == [0, 1] and sia["from_updates"]
    assert sia["updates"] == {"clients": 2, "bytes": sum(f.stat().st_size for f in files), "kept": True}
    summary = json.loads((kept / "summary.json").read_text())
    assert summary["curves"]["sia/update_bytes"] == [[0, 0.0], [1, float(sia["updates"]["bytes"])]]
    assert "kept after the run, for re-audits" in (kept / "report.md").read_text()
    assert _report(kept, 0)["audit"]["sia"]["note"].startswith("Round 0")


def test_the_kept_updates_are_what_the_clients_sent(kept):
    """FedAvg of the kept updates (equal numbers of examples: their mean) is the round's global adapter."""
    updates = [load_file(str(kept / "round_1" / "updates" / f"client_{c}.safetensors")) for c in (0, 1)]
    assert [m["num_examples"] for m in _report(kept, 1)["train"]] == [24, 24]
    global_ = load_file(str(kept / "round_1" / "adapter" / "adapter_model.safetensors"))
    assert updates[0].keys() == global_.keys() and any(not updates[0][k].equal(updates[1][k]) for k in global_)
    for k, v in global_.items():
        torch.testing.assert_close((updates[0][k] + updates[1][k]) / 2, v, rtol=1e-5, atol=1e-7)


def test_a_reaudit_of_a_run_that_kept_its_updates_gives_the_runs_figures(kept, capsys):
    main(["audit", f"run={kept}", "name=again"])
    main(["audit", f"run={kept}", "rounds=1", "name=last"])  # the trajectory reads round 0 from its saved adapter
    capsys.readouterr()
    for r in (0, 1):
        assert _report(kept / "audits" / "again", r)["audit"] == _report(kept, r)["audit"], r
    assert _report(kept / "audits" / "last", 1)["audit"] == _report(kept, 1)["audit"]
    assert sorted((kept / "round_1" / "updates").glob("*")) != []  # a re-audit never removes the run's updates


def test_updates_go_once_their_round_is_audited_unless_kept(compose, tmp_path, capsys):
    """The server's side without Flower: the clients' real local rounds, their updates kept as the server keeps them;
    the auditor lets them go once their round is audited. A re-audit with source inference is then refused in one
    line naming the setting, and one without it runs."""
    cfg = from_dict(compose(*INSIDERS))
    run = Path(cfg.run_dir)
    run.mkdir(parents=True)
    write_config(cfg, run / "config.yaml")
    auditor, start = training_auditor(cfg, "fl")
    assert auditor.archive.writes and not auditor.archive.keeps_updates
    with contextlib.redirect_stderr(io.StringIO()):
        auditor.evaluate(0, start)
        states = {c: client_round(cfg, c, start, {"server-round": 1})[0] for c in (0, 1)}
        auditor.archive.save_updates(1, states)
        assert auditor.archive.kept_rounds() == [1]
        auditor.evaluate(1, {k: (states[0][k] + states[1][k]) / 2 for k in start})
        auditor.finish()
    sia = _report(run, 1)["audit"]["sia"]
    assert sia["updates"]["clients"] == 2 and sia["updates"]["bytes"] > 0 and sia["updates"]["kept"] is False
    assert not (run / "round_1" / "updates").exists() and auditor.archive.kept_rounds() == []
    assert "removed once their round was audited" in (run / "report.md").read_text()

    with pytest.raises(SystemExit):
        main(["audit", f"run={run}", "name=refused"])
    err = capsys.readouterr().err.strip()
    assert err == (f"fedmem: invalid configuration: audit.methods ['sia'] score each client's update of a round, and "
                   f"run={run} kept none for round(s) [1]: train it with audit.keep_updates=true to audit it so")
    assert not (run / "audits" / "refused").exists()
    main(["audit", f"run={run}", "audit.methods=[trajectory]", "name=trajectory"])
    assert _report(run / "audits" / "trajectory", 1)["audit"]["trajectory"] == _report(run, 1)["audit"]["trajectory"]


def test_which_runs_keep_updates(compose):
    def archive(*overrides):
        return RunArchive.of_training(from_dict(compose(*overrides)))

    assert not archive("audit.methods=[utility]").writes  # no method scores them
    only_kept = archive("audit.methods=[utility]", "audit.keep_updates=true")  # kept for a later re-audit
    assert only_kept.writes and only_kept.keeps_updates
    assert not archive(*INSIDERS, "strategy=centralized").writes  # no clients


def test_a_centralized_run_says_source_inference_does_not_apply_and_follows_its_trajectory(compose, tmp_path):
    with contextlib.redirect_stderr(io.StringIO()):
        run = run_experiment(compose("strategy=centralized", *INSIDERS), str(tmp_path / "cl"))
    report = _report(run, 1)
    assert "centralized run has no clients" in report["audit"]["sia"]["note"]
    assert report["audit"]["trajectory"]["headline"]["trajectory_auc"] is not None
    assert not list(run.glob("round_*/updates"))


def test_an_audit_of_a_model_fedmem_did_not_train_refuses_source_inference(tmp_path, capsys, monkeypatch, cache_dir):
    from tests.test_offline_audit import FAST_LOCAL, _external_model

    model, _, data = _external_model(tmp_path)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()  # the model's own progress output
    with pytest.raises(SystemExit) as info:
        main(["audit", f"model.path={model}", "task=dialog", "data=local", f"data.path={data}",
              "data.columns={patient:text,doctor:reply}", "data.client_column=site", "data.membership_column=seen",
              *FAST_LOCAL, f"cache_dir={cache_dir}", *INSIDERS])
    assert info.value.code == 2 and capsys.readouterr().err.strip() == (
        "fedmem: invalid configuration: audit.methods ['sia'] score each client's update of a round, which only a "
        "federated run fedmem trains keeps: leave them out of an audit of a model fedmem did not train")
    assert not (tmp_path / "runs").exists()
