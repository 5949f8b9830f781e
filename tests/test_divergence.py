"""A model that diverges is a finding, not a crash: local training that turns non-finite stops at its step and fails
the round in one line naming the clients and the setting; a global model that the DP noise destroyed is audited as
degenerate (no figure, utility 0) and the run, and a sweep over noise levels, go to their end; settings no run could
honour are refused before it; a DP run whose noise will dominate is warned about."""

from __future__ import annotations

import json
import math
import re
import subprocess

import pytest
import yaml

from bench.staging import FAST, fedmem, fedmem_env
from fedmem.engine.train import TrainingDiverged, train_local
from tests.conftest import report_schema_errors

# a learning rate no run survives on the test-sized model (50 diverges on the default preset's larger one; on the
# test-sized one its loss stays finite): the loss is nan at the second step
DIVERGING = ["train.lr=1e20", "train.effective_batch=8"]


def test_training_stops_at_the_step_its_loss_turns_non_finite():
    from fedmem.engine.config import TrainConfig
    from tests.helpers import texts, tiny_model, tiny_tokenizer

    tok = tiny_tokenizer()
    model = tiny_model(tok)
    for p in model.parameters():
        p.requires_grad_(True)
    examples = [tok(t)["input_ids"][:48] for t in texts(16, seed=3)]
    cfg = TrainConfig(lr=1e20, batch_size=4, effective_batch=4, local_epochs=1, progress=False)
    with pytest.raises(TrainingDiverged) as raised:
        train_local(model, examples, cfg, seed=0, pad_id=tok.pad_token_id)
    assert raised.value.step >= 2 and raised.value.what in ("the loss", "the gradient's norm", "the weights")
    assert f"training diverged at step {raised.value.step}" in str(raised.value)


def test_a_gradient_that_overflows_before_any_step_blames_the_model_not_the_training():
    """A first gradient that is not finite comes from the model the client was given (no learning rate or clipping
    has acted yet): the client sends that model back untrained, and the round goes on. The overflow is injected in the
    backward pass of the real training loop."""
    from fedmem.engine.config import TrainConfig
    from tests.helpers import texts, tiny_model, tiny_tokenizer

    tok = tiny_tokenizer()
    model = tiny_model(tok)
    for p in model.parameters():
        p.requires_grad_(True)
    model.lm_head.weight.register_hook(lambda g: g * float("inf"))
    examples = [tok(t)["input_ids"][:48] for t in texts(8, seed=3)]
    cfg = TrainConfig(lr=1e-4, batch_size=4, effective_batch=4, local_epochs=1, progress=False)
    with pytest.raises(TrainingDiverged) as raised:
        train_local(model, examples, cfg, seed=0, pad_id=tok.pad_token_id)
    e = raised.value
    assert (e.step, e.what, e.untrained) == (1, "the gradient's norm", True) and math.isfinite(e.loss)


def test_a_model_confidently_wrong_on_every_token_is_degenerate_and_an_ordinary_one_is_not():
    """Finite weights and logits, but a mean next-token loss far above the uniform guess's log V (what DP noise far
    above the update leaves): degenerate, with the figures that say so; the same model unscaled is not."""
    import torch

    from fedmem.engine.health import LOSS_FACTOR, degenerate
    from tests.helpers import texts, tiny_model, tiny_tokenizer

    tok = tiny_tokenizer()
    prompts = [tuple(tok(t)["input_ids"][:32]) for t in texts(4, seed=5)]
    model = tiny_model(tok)
    assert degenerate(model, {}, prompts) is None
    with torch.no_grad():
        model.lm_head.weight.mul_(1e6)  # every logit a million times larger: finite, and certain of the wrong token
    reason = degenerate(model, {}, prompts)
    assert re.fullmatch(rf"its mean next-token loss on 4 audit prompts is \S+ nats, over {LOSS_FACTOR} times the "
                        rf"uniform guess's log V = {math.log(len(tok)):.3g}: confidently wrong on every token", reason)


def test_a_federated_run_whose_clients_diverge_fails_naming_them_the_step_and_the_setting(tmp_path, cache_dir):
    run = tmp_path / "run"
    out = subprocess.run(fedmem("run", *FAST, f"cache_dir={cache_dir}", *DIVERGING, f"hydra.run.dir={run}"),
                         env=fedmem_env(cache_dir), capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stderr[-3000:]
    last = out.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"fedmem: run failed: round 1: training diverged, client 0 at step \d+ \(.+\); client 1 at "
                        r"step \d+ \(.+\); nothing of it was averaged\. Lower train\.lr \(now 1e\+20\) or clip the "
                        r"gradient \(train\.max_grad_norm=1\)", last), last
    status = json.loads((run / "status.json").read_text())
    assert status["status"] == "failed" and (run / "round_0" / "report.json").is_file()
    assert not (run / "round_1").exists()  # nothing of the round was averaged or written
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("setting, message", [
    ("train.lr=nan", "train.lr must be a finite number, got nan"),
    ("train.lr=-1", "train.lr must be > 0, got -1"),
    ("defense.noise_multiplier=inf", "defense.noise_multiplier must be a finite number, got inf"),
    ("train.max_grad_norm=nan", "train.max_grad_norm must be a finite number, got nan"),
])
def test_settings_no_run_could_honour_are_refused_naming_the_key(setting, message, tmp_path):
    out = subprocess.run(fedmem("run", setting, f"hydra.run.dir={tmp_path / 'run'}"), env=fedmem_env(""),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and out.stderr.strip().splitlines()[-1] == f"fedmem: invalid configuration: {message}"
    assert not (tmp_path / "run").exists()


def test_a_sweep_over_noise_with_a_destroyed_end_finishes_its_rounds_and_tables(tmp_path, cache_dir):
    """z = 0.001 and z = 1e20 (a noise of 1e21 per weight on the average of two clients: the adapter's products
    overflow, the logits are not finite; at z = 0.5 the noise's norm, about 1,450 against C = 20, already leaves a
    model whose loss is thousands of nats, degenerate too): the destroyed run is audited round after round as
    degenerate, every memorization section says it cannot be measured and holds no figure, utility is 0, the run
    finishes, and the sweep's table and frontier mark it destroyed. The warning before it gives the noise's norm."""
    sweep = tmp_path / "sweep"
    out = subprocess.run(fedmem("run", "-m", *FAST, f"cache_dir={cache_dir}", "defense=dp", "defense.clipping_norm=20",
                                "defense.noise_multiplier=0.001,1e20", "strategy.num_rounds=2",
                                "audit.methods=[utility,pa,mia]", "audit.mia.n=3", "audit.mia.suffix_len=16",
                                f"hydra.sweep.dir={sweep}"),
                         env=fedmem_env(cache_dir), capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert re.search(r"fedmem: warning: DP's noise on each round's average has an expected norm of \S+, \S+ times "
                     r"the clipping norm C = 20", out.stderr)
    destroyed = next(p.parent for p in sweep.glob("*/config.yaml")
                     if yaml.safe_load(p.read_text())["defense"]["noise_multiplier"] > 1)
    assert json.loads((destroyed / "status.json").read_text())["status"] == "finished"
    for r in (1, 2):
        report = json.loads((destroyed / f"round_{r}" / "report.json").read_text())
        health = report["health"]
        assert health["degenerate"] and "not finite" in health["reason"] and health["noise_norm"] > 1e20
        for name in ("pa", "mia"):
            section = report["audit"][name]
            assert section["note"].startswith("Not measurable on a degenerate model")
            assert all(v is None for v in section["headline"].values())
        assert report["audit"]["utility"]["headline"]["rouge_l"] == 0.0
        assert report_schema_errors(report) == []
        assert "Not measurable on a degenerate model" in (destroyed / f"round_{r}" / "report.md").read_text()
    assert "DEGENERATE model" in out.stderr
    kept = next(p.parent for p in sweep.glob("*/config.yaml") if p.parent != destroyed)
    assert not json.loads((kept / "round_2" / "report.json").read_text())["health"]["degenerate"]
    md = (sweep / "sweep_report.md").read_text()
    assert "(1 destroyed)" in md and (sweep / "defense_frontier.png").is_file()


def test_a_zero_update_passes_flowers_dp_clipping_unchanged_and_others_are_clipped_as_flower_clips_them():
    """A client given a destroyed model trains nothing and sends it back: an update of norm 0, on which Flower's own
    clipping divides by zero."""
    import numpy as np
    from flwr.supercore.differential_privacy import compute_clip_model_update

    import clients.zero_update  # noqa: F401

    start = [np.ones(4, dtype=np.float32), np.ones(2, dtype=np.float32)]
    same = [a.copy() for a in start]
    compute_clip_model_update(same, start, 1.0)
    assert all(np.array_equal(a, b) for a, b in zip(same, start))
    moved = [a + 3 for a in start]  # an update of norm 3 sqrt(6), clipped to 1
    compute_clip_model_update(moved, start, 1.0)
    assert np.sqrt(sum(float(((a - b) ** 2).sum()) for a, b in zip(moved, start))) == pytest.approx(1.0, rel=1e-5)
