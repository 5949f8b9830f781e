"""The real Flower simulation (Ray backend) on the tiny preset, FedProx/FedAvg equivalence, determinism."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from fedmem.cli import run_experiment
from fedmem.config.experiment import from_dict
from fedmem.engine.model.load import adapter_state
from fedmem.engine.train import train_local, trainable_params
from fedmem.experiment.loading import fresh_lora_model
from fedmem.experiment.training import client_round, run_centralized
from fedmem.federation.fedprox import proximal_term
from fedmem.federation.strategies import strategy_named
from bench.staging import left
from tests.conftest import RUN_MARK, alive, ray_processes, report_schema_errors, run_mark


def _adapter(run_dir: Path, r: int) -> dict:
    return load_file(str(run_dir / f"round_{r}" / "adapter" / "adapter_model.safetensors"))


@pytest.fixture(scope="module")
def sims(tmp_path_factory, cache_dir):
    """FedAvg and FedProx(mu=0) runs of 2 clients x 1 round through the Flower simulation: FedAvg's clients train
    side by side (the default share of the cores, one actor each), FedProx's one after another (FAST's one actor)."""
    from fedmem.config.compose import compose_dict
    from tests.conftest import FAST

    out = {}
    for name, extra in [("fedavg", ["strategy=fedavg", "simulation.num_cpus_per_client=auto"]),
                        ("fedprox0", ["strategy=fedprox", "strategy.proximal_mu=0.0"])]:
        run_dir = tmp_path_factory.mktemp(name)
        d = compose_dict([*FAST, f"cache_dir={cache_dir}", *extra])
        out[name] = run_experiment(d, str(run_dir))
    return out


def test_simulation_writes_round_reports(sims):
    run = sims["fedavg"]
    for r in (0, 1):
        rep = json.loads((run / f"round_{r}" / "report.json").read_text())
        assert rep["round"] == r and rep["strategy"] == "fedavg"
        assert "utility" in rep["audit"] and rep["versions"]["flwr"]
        assert (run / f"round_{r}" / "report.html").exists()
        assert not report_schema_errors(rep)  # the Flower path writes the documented report too
    rep1 = json.loads((run / "round_1" / "report.json").read_text())
    assert [m["client"] for m in rep1["train"]] == [0, 1]  # both clients trained, losses recorded per client
    assert all(m["train_loss"] > 0 and m["steps"] > 0 and m["num_examples"] == 24 for m in rep1["train"])
    assert rep1["participation"] == {"sampled": 2, "trained": [0, 1], "failed": [], "no_reply": 0}
    assert all(m["truncated_examples"] >= 0 and m["max_seq_len"] == 128 for m in rep1["train"])
    assert (run / "summary.json").exists() and (run / "config.yaml").exists()
    assert json.loads((run / "status.json").read_text())["status"] == "finished"


def test_training_moves_the_adapter(sims):
    a0, a1 = _adapter(sims["fedavg"], 0), _adapter(sims["fedavg"], 1)
    assert set(a0) == set(a1) and all("lora" in k for k in a0)  # only the adapter is saved / sent
    assert any(not torch.equal(a0[k], a1[k]) for k in a0)


def test_fedprox_mu0_is_bit_identical_to_fedavg(sims):
    # FedAvg's clients trained side by side and FedProx's one after another: each client trains alone on its thread
    a, b = _adapter(sims["fedavg"], 1), _adapter(sims["fedprox0"], 1)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_same_seed_same_adapter_and_other_seed_differs(compose):
    cfg = from_dict(compose())
    model, _ = fresh_lora_model(cfg)
    start = adapter_state(model)
    # only LoRA weights travel, the lm_head adapter of the tiny preset included, never a frozen base matrix
    assert all("lora_" in k for k in start) and any("lm_head.lora_" in k for k in start)
    s1, _ = client_round(cfg, 0, start, {"server-round": 1})
    s2, _ = client_round(cfg, 0, start, {"server-round": 1})
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    cfg2 = from_dict(compose("seed=7"))
    s3, _ = client_round(cfg2, 0, adapter_state(fresh_lora_model(cfg2)[0]), {"server-round": 1})
    assert any(not torch.equal(s1[k], s3[k]) for k in s1)


def test_proximal_term_covers_trainable_weights_only(compose):
    cfg = from_dict(compose())
    model, _ = fresh_lora_model(cfg)
    global_params = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.add_(0.5 if p.requires_grad else 3.0)  # frozen weights move too, but must not count
    expected = sum(0.25 * p.numel() for n, p in model.named_parameters() if p.requires_grad)
    assert proximal_term(trainable_params(model), global_params).item() == pytest.approx(expected, rel=1e-5)


def test_fedprox_mu_the_server_sent_pulls_towards_global(compose):
    """FedProx's registry entry turns the mu the server sent into the clients' local term; mu = 0 adds none."""
    from fedmem.experiment.training import train_examples

    cfg = from_dict(compose("strategy=fedprox"))
    fedprox = strategy_named("fedprox")
    assert fedprox.local_term(cfg.strategy, {"proximal-mu": 0.0}) is None
    assert strategy_named("fedavg").local_term(cfg.strategy, {"proximal-mu": 50.0}) is None  # FedAvg has no term
    ex, _ = train_examples(cfg, 0)
    dist = {}
    for mu in (0.0, 50.0):
        model, tok = fresh_lora_model(cfg)
        g = {n: p.detach().clone() for n, p in trainable_params(model).items()}
        train_local(model, ex, cfg.train, seed=0, pad_id=tok.pad_token_id,
                    local_term=fedprox.local_term(cfg.strategy, {"proximal-mu": mu}))
        dist[mu] = proximal_term(trainable_params(model), g).item()
    assert 0 < dist[50.0] < dist[0.0]


def test_a_run_that_fails_is_marked_failed(compose, tmp_path, monkeypatch, capsys):
    """Any error of a started run ends it with one line and exit code 1; status.json keeps the error and its
    traceback."""
    import fedmem.experiment.training

    def broken(*args, **kwargs):
        raise RuntimeError("optimizer exploded")

    monkeypatch.setattr(fedmem.experiment.training, "train_local", broken)
    with pytest.raises(SystemExit) as exited:
        run_experiment(compose("strategy=centralized"), str(tmp_path / "cl"))
    status = json.loads((tmp_path / "cl" / "status.json").read_text())
    assert exited.value.code == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"fedmem: run failed: RuntimeError: optimizer exploded (its traceback is in {tmp_path / 'cl' / 'status.json'})")
    assert (status["status"], status["error"]) == ("failed", "RuntimeError: optimizer exploded")
    assert status["traceback"].startswith("Traceback") and "in broken" in status["traceback"]
    assert not (tmp_path / "cl" / "summary.json").exists() and (tmp_path / "cl" / "round_0" / "report.json").exists()


def test_centralized_mode_runs(compose, tmp_path):
    d = compose("strategy=centralized")
    run = run_experiment(d, str(tmp_path / "cl"))
    rep = json.loads((run / "round_1" / "report.json").read_text())
    assert rep["label"] == "cl" and rep["train"][0]["num_examples"] == 2 * 24


def test_training_length_cuts_are_counted_and_auto_keeps_every_example_whole(compose):
    from fedmem.experiment.loading import sequence_length
    from fedmem.experiment.training import train_examples

    cfg = from_dict(compose("model.max_seq_len=16"))
    ex, cut = train_examples(cfg, 0)
    assert sequence_length(cfg) == 16 and all(len(x) <= 16 for x in ex) and cut == len(ex)
    # the test preset's 512-token vocabulary spends more tokens on a text than the default's: room for the longest
    auto = from_dict(compose("model.max_seq_len=auto", "model.tiny.max_position_embeddings=1024"))
    ex, cut = train_examples(auto, 0)
    assert cut == 0 and sequence_length(auto) == max(len(x) for x in train_examples(auto, None)[0])
    capped = from_dict(compose("model.max_seq_len=auto"))  # auto stops at the model's 512 positions
    assert sequence_length(capped) == 512 and train_examples(capped, 0)[1] >= 1


def test_centralized_baseline_trains_with_the_clients_thread_setting(compose, tmp_path, monkeypatch):
    import fedmem.experiment.training

    seen = []

    def record_threads(*args, **kwargs):
        seen.append(torch.get_num_threads())
        raise RuntimeError("stop after the first epoch")

    before = torch.get_num_threads()
    monkeypatch.setattr(fedmem.experiment.training, "train_local", record_threads)
    try:
        with pytest.raises(RuntimeError, match="stop after"):
            run_centralized(from_dict(compose("strategy=centralized", "simulation.torch_threads=2")))
    finally:
        torch.set_num_threads(before)
    assert seen == [2]


def test_a_round_with_a_failed_client_stops_the_run_and_is_marked_failed(compose, tmp_path, monkeypatch):
    """A real simulation whose client 1 raises: the round must not pass as trained (default: every sampled client
    must train), the run is marked failed naming the error, and round 0's report is the only one written."""
    from flwr.simulation import run_simulation

    from clients.client_app import make_client_app
    from fedmem.config.experiment import write_config
    from fedmem.experiment.lifecycle import FAILURE as FAILURE_FILE
    from fedmem.federation.rounds import RoundFailedError
    from server.server_app import make_server_app

    mark = run_mark()
    monkeypatch.setenv(RUN_MARK, mark)  # Ray's daemons and workers inherit it
    cfg = from_dict(compose())
    Path(cfg.run_dir).mkdir(parents=True)
    path = Path(cfg.run_dir) / "config.yaml"
    write_config(cfg, path)

    def failing_round(cfg, client, *args, **kwargs):
        if client == 1:
            raise RuntimeError("client 1's disk is full")
        return client_round(cfg, client, *args, **kwargs)

    with pytest.raises(RoundFailedError, match=r"round 1: 1 of 2 sampled clients trained \(clients \[0\]\)"):
        run_simulation(server_app=make_server_app(cfg), client_app=make_client_app(str(path), failing_round),
                       num_supernodes=2, backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0}})
    failure = json.loads((Path(cfg.run_dir) / FAILURE_FILE).read_text())["error"]
    assert "needs 2; 1 failed, 0 sent no reply (node " in failure and "client 1's disk is full" in failure
    assert "\n" not in failure  # the remote traceback is cut to its last line
    assert (Path(cfg.run_dir) / "round_0" / "report.json").exists()
    assert not (Path(cfg.run_dir) / "round_1").exists() and not (Path(cfg.run_dir) / "summary.json").exists()
    # Ray's daemons exit asynchronously after the shutdown
    assert not left(alive(ray_processes(mark))), "the failed run left Ray processes behind"
