"""Invalid configurations fail before any training, with one clear message."""

import subprocess
import sys

import pytest

from fedmem.config import from_dict


@pytest.mark.parametrize(
    "override, message",
    [
        ("data.num_clients=0", "num_clients"),
        ("audit.prefix_len=80", "suffix budget"),
        ("strategy.name=fedbogus", "strategy.name"),
        ("audit.methods=[utility,nosuch]", "unknown method 'nosuch'"),
        ("train.effective_batch=12", "multiple of train.batch_size"),
        ("strategy.proximal_mu=0.1", "only used by fedprox"),
    ],
)
def test_invalid_config_is_rejected(compose, override, message):
    with pytest.raises(ValueError, match=message):
        from_dict(compose(override))


def test_tiny_preset_pa_calibration_needs_the_synthetic_public_corpus(compose):
    # conf/model/tiny.yaml calibrates PA's n on the public corpus, which only the synthetic source has
    with pytest.raises(ValueError, match="generic_source=public needs the synthetic source"):
        from_dict(compose("audit.methods=[utility,pa]", "data.source=hf"))
    cfg = from_dict(compose("audit.methods=[utility,pa]", "data.source=hf", "audit.pa.generic_source=appendix_b"))
    assert cfg.audit.sections["pa"]["generic_source"] == "appendix_b"


def test_unknown_option_is_named(compose):
    d = compose()
    d["train"]["learning_rate"] = 1.0
    with pytest.raises(ValueError, match="learning_rate"):
        from_dict(d)


def test_default_config_is_valid(compose):
    cfg = from_dict(compose())
    assert cfg.strategy.name == "fedavg" and cfg.num_clients == 2
    assert cfg.hash() == from_dict(compose()).hash()
    assert cfg.hash() != from_dict(compose("seed=1")).hash()


def test_written_config_reads_back_with_every_override(compose, tmp_path):
    """The Flower apps rebuild the config from the YAML that `fedmem run` writes: method overrides must survive."""
    from fedmem.experiment import load_config, write_config

    cfg = from_dict(compose("audit.mr.n=7", "audit.pa.c=9", "audit.pearl.perturbation=synonym", "train.lr=0.01"))
    write_config(cfg, tmp_path / "config.yaml")
    back = load_config(tmp_path / "config.yaml")
    assert back == cfg and back.hash() == cfg.hash()
    assert (back.audit.sections["mr"]["n"], back.audit.sections["pa"]["c"]) == (7, 9)
    assert back.audit.sections["pearl"]["perturbation"] == "synonym"
    assert "sections" not in cfg.to_dict()["audit"] and cfg.to_dict()["audit"]["mr"]["n"] == 7  # conf/ layout


def test_full_default_composes():
    from fedmem.cli import compose_dict

    cfg = from_dict(compose_dict([]))
    assert (cfg.task.name, cfg.model.name, cfg.strategy.name, cfg.strategy.num_rounds) == ("dialog", "tiny", "fedavg", 3)
    assert cfg.num_clients == 3 and cfg.audit.prefix_len == 30


@pytest.mark.parametrize(
    "override, message",
    [("task=nosuch", "task"), ("data.num_clients=0", "num_clients"), ("audit.prefix_len=100", "suffix budget")],
)
def test_cli_fails_before_training_and_writes_nothing(tmp_path, override, message):
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "fedmem.cli", "run", override, f"hydra.run.dir={run_dir}"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0
    assert message in proc.stderr
    assert not run_dir.exists() or not any(run_dir.iterdir())
