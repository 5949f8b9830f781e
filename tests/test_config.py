"""Invalid configurations fail before any training, with one clear message."""

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fedmem.config.compose import compose_dict
from fedmem.config.experiment import SimulationConfig, from_dict
from fedmem.engine.config import TrainConfig
from tests.conftest import FAST, synthetic_only


@pytest.mark.parametrize(
    "override, message",
    [
        ("data.num_clients=0", "num_clients"),
        ("audit.prefix_len=0", "audit.prefix_len must be >= 1"),
        ("audit.methods=[utility,pa] audit.pa.suffix_len=0", "audit.pa.suffix_len must be >= 1"),
        ("strategy.name=fedbogus", "strategy.name"),
        ("audit.methods=[utility,nosuch]", "unknown method 'nosuch'"),
        ("train.effective_batch=12", "multiple of train.batch_size"),
        ("train.lr=abc", "train.lr must be a finite number, got 'abc'"),
        ("train.weight_decay=-1", "train.weight_decay and train.max_grad_norm must be >= 0"),
        ("seed=abc", "seed must be an integer, got 'abc'"),
        ("audit.methods=[utility,pearl] audit.pearl.score=auc",
         "audit.pearl.score must be one of gfd, falloff, expected_drop"),
        ("audit/decoding=greedy audit.decoding.strategy=beam", "audit.decoding.strategy must be one of greedy"),
        ("model.dtype=int8", "model.dtype must be one of auto, float32, bfloat16, float16"),
        ("data.source=web", "data.source: unknown source 'web'"),
        ("audit.samples_per_client=some", "audit.samples_per_client must be an integer or one of all"),
        # a size beyond the prepared pool is an error naming both numbers, never a silent cap
        ("audit.methods=[utility,mr] audit.mr.n=1000",
         "audit.mr audits 1000 train samples per client, but audit.samples_per_client prepares 6"),
        ("audit.utility.n=5", "audit.utility audits 5 test samples per client, but audit.test_per_client prepares 3"),
        ("tracker=tensorboard tracker.uri=http://localhost:5000", "tracker.uri is MLflow's tracking URI, not used by "
                                                                   "tracker=tensorboard"),
        ("tracker=wandb tracker.group=", "tracker.project and tracker.group must not be empty"),
        ("tracker.name=comet", "tracker.name must be one of none, mlflow, tensorboard, wandb"),
    ],
)
def test_invalid_config_is_rejected(compose, override, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        from_dict(compose(*override.split()))


def test_a_strategy_reads_only_its_own_settings():
    from fedmem.federation.fedprox import FedProxConfig
    from fedmem.federation.strategies import strategy_config

    assert strategy_config({"name": "fedprox", "proximal_mu": 0.1}) == FedProxConfig(name="fedprox", proximal_mu=0.1)
    with pytest.raises(ValueError, match=r"strategy.proximal_mu is not used by strategy.name=fedavg; it is a setting "
                                         r"of strategy.name=fedprox"):
        strategy_config({"name": "fedavg", "proximal_mu": 0.1})
    # a config written when every strategy held every setting (a saved run's config.yaml) still reads
    assert strategy_config({"name": "fedavg", "proximal_mu": 0.0, "server_lr": 0.01, "server_momentum": 0.9}) == \
        strategy_config({"name": "fedavg"})
    with pytest.raises(ValueError, match="strategy.name: unknown strategy 'fedsgd'"):
        strategy_config({"name": "fedsgd"})


def test_offline_demo_pa_calibration_needs_a_public_corpus(compose):
    # conf/experiment/offline_demo.yaml calibrates PA's n on the public corpus: hub and local data supply one as a
    # share of their rows unless the user turns that off without naming another
    hf = [o for o in FAST if not synthetic_only(o)]
    compose = lambda *o: {**compose_dict([*hf, *o]), "run_dir": "unused"}  # noqa: E731
    cfg = from_dict(compose("audit.methods=[utility,pa]", "data=hf"))
    assert cfg.data.public_share == 0.2
    with pytest.raises(ValueError, match="generic_source=public needs a public corpus"):
        from_dict(compose("audit.methods=[utility,pa]", "data=hf", "data.public_share=0",
                          "model.path=/some/model", "model.name=qwen2.5-0.5b"))
    cfg = from_dict(compose("audit.methods=[utility,pa]", "data=hf", "data.public_share=0",
                            "audit.pa.generic_source=appendix_b", "model.path=/m", "model.name=qwen2.5-0.5b"))
    assert cfg.audit.sections["pa"].generic_source == "appendix_b"


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
    from fedmem.config.compose import load_config
    from fedmem.config.experiment import write_config

    cfg = from_dict(compose("audit.mr.n=7", "audit.pa.c=9", "audit.pearl.perturbation=synonym", "train.lr=0.01"))
    write_config(cfg, tmp_path / "config.yaml")
    back = load_config(tmp_path / "config.yaml")
    assert back == cfg and back.hash() == cfg.hash()
    assert (back.audit.sections["mr"].n, back.audit.sections["pa"].c) == (7, 9)
    assert back.audit.sections["pearl"].perturbation == "synonym"
    assert "sections" not in cfg.to_dict()["audit"] and cfg.to_dict()["audit"]["mr"]["n"] == 7  # conf/ layout


def test_full_default_composes():
    from fedmem.config.compose import compose_dict

    cfg = from_dict(compose_dict([]))
    assert (cfg.task.name, cfg.model.name, cfg.strategy.name) == ("dialog", "tiny", "fedavg")
    assert cfg.strategy.num_rounds == 3
    assert cfg.num_clients == 3 and cfg.audit.prefix_len == 30


@pytest.mark.parametrize(
    "override, message",
    [("task=nosuch", "task"), ("data.num_clients=0", "num_clients"), ("audit.mr.max_new_tokens=0", "audit.mr.max_new_tokens must be >= 1")],
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


def test_every_default_lives_in_the_dataclasses_and_a_preset_lists_only_its_changes():
    """Each group preset extends its dataclass schema (Hydra's ConfigStore) and sets no key to the value the schema
    already holds; the composed default config equals the dataclasses' defaults, key for key."""
    from fedmem.config.compose import schemas

    conf = Path(__file__).resolve().parents[1] / "conf"
    found = schemas()
    for group in ("task", "data", "strategy", "audit/decoding", "tracker"):
        for preset in sorted((conf / group).glob("*.yaml")):
            d = yaml.safe_load(preset.read_text()) or {}
            assert preset.read_text().startswith("# fedmem run"), preset
            schema = d["defaults"][0]
            assert d["defaults"] == [schema, "_self_"], preset
            variant = group in ("data", "strategy")  # a source or strategy: its own schema, <name>_schema
            base = found[f"{group}/{schema.removesuffix('_schema')}" if variant else group]
            same = [k for k, v in d.items() if k in base and base[k] == v and k not in ("name", "source", "strategy")]
            assert same == [], f"{preset} repeats its schema's defaults for {same}"
    root = yaml.safe_load((conf / "config.yaml").read_text())
    assert not {"train", "audit", "simulation", "seed"} & set(root)  # the root's defaults are the dataclasses' too
    # no YAML that says nothing: every file in conf/ sets a value or selects a preset
    empty = [p.relative_to(conf).as_posix() for p in conf.rglob("*.yaml")
             if set(yaml.safe_load(p.read_text()) or {}) <= {"defaults"} and p.name != "config.yaml"]
    assert empty == []
    d = compose_dict([])  # the model preset (tiny) sets train.*: its own changes
    assert d["simulation"] == dataclasses.asdict(SimulationConfig())
    assert {k: d["train"][k] for k in ("weight_decay", "max_grad_norm")} == {"weight_decay": TrainConfig().weight_decay,
                                                                             "max_grad_norm": TrainConfig().max_grad_norm}


def test_model_presets_set_model_and_training_only():
    """Audit decision rules live in experiment presets (named in every report), never in a model preset."""
    conf = Path(__file__).resolve().parents[1] / "conf"
    for preset in sorted((conf / "model").glob("*.yaml")):
        keys = set(yaml.safe_load(preset.read_text()))
        assert keys <= {"model", "train"}, f"{preset.name} sets {sorted(keys - {'model', 'train'})}"
    for preset in sorted((conf / "experiment").glob("*.yaml")):
        assert yaml.safe_load(preset.read_text())["experiment"] == preset.stem


def test_the_offline_presets_are_built_here_and_need_a_public_corpus():
    from fedmem.config.compose import compose_dict

    small = from_dict(compose_dict(["model=small"]))
    tiny = from_dict(compose_dict([]))
    assert small.model.offline and tiny.model.offline and small.model.name == "small"
    assert small.model.tiny.hidden_size > tiny.model.tiny.hidden_size and small.model.max_seq_len == "auto"
    assert not from_dict(compose_dict(["model=qwen2.5-0.5b", "model.path=/x", "experiment=paper"])).model.offline
    with pytest.raises(ValueError, match="model=small trains its tokenizer and prior on the data's public corpus"):
        from_dict(compose_dict(["model=small", "task=text", "data=local", "data.path=x.jsonl",
                                "data.client_column=s", "data.public_share=0"]))


def test_experiment_preset_is_recorded_and_other_models_keep_the_papers_rules(compose):
    cfg = from_dict(compose("audit.methods=[utility,pa,pearl]"))
    assert cfg.experiment == "offline_demo" and cfg.audit.sections["pa"].generic_source == "public"
    paper = from_dict(compose("experiment=paper", "audit.methods=[utility,pa,pearl]"))
    assert paper.experiment == "paper"
    assert paper.audit.sections["pa"].generic_source == "appendix_b"
    assert paper.audit.sections["pearl"].score == "gfd"
    assert paper.hash() != cfg.hash()


def test_a_pool_the_data_cannot_fill_is_an_error_naming_both_numbers(compose):
    from fedmem.audit.pool import build_audit_pool
    from fedmem.experiment.loading import base_model, federated_data

    cfg = from_dict(compose("audit.samples_per_client=40"))  # 24 train rows per client, some of them canary copies
    _, tokenizer, _ = base_model(cfg)
    with pytest.raises(ValueError, match=r"audit.samples_per_client=40, but client 0's train split has only \d+"):
        build_audit_pool(cfg.audit, cfg.task, federated_data(cfg), tokenizer, cfg.seed)
    every = from_dict(compose("audit.samples_per_client=all"))
    run = build_audit_pool(every.audit, every.task, federated_data(every), tokenizer, every.seed)
    assert 6 < min(len(v) for v in run.train.values()) <= 24


def test_a_method_whose_draw_misses_the_common_draw_fails_before_training(compose):
    """The pool the preflight builds (``checked_plan``) carries each client's common draw, and a method whose own draw
    would leave part of it out is refused there, naming the method's size and audit.common_draw."""
    from fedmem.experiment.loading import checked_plan
    from fedmem.experiment.loading import base_model, federated_data

    cfg = from_dict(compose("audit.methods=[utility,pa,pearl]", "audit.common_draw=3", "audit.pearl.n=3",
                            "audit.pa.n=2"))
    _, tokenizer, _ = base_model(cfg)
    data = federated_data(cfg)
    with pytest.raises(ValueError, match=re.escape("audit.common_draw=3: every method audits each client's common "
                                                   "draw, and audit.pa.n=2 draws fewer: set audit.common_draw=2")):
        checked_plan(cfg, data, tokenizer)
    with pytest.raises(ValueError, match=r"audit.common_draw=9: client '\w+' has \d+ (train|held-out) samples with 16 "
                                         r"suffix "
                                         r"tokens \(audit.pa.suffix_len\).*: set audit.common_draw=\d+"):
        checked_plan(from_dict(compose("audit.methods=[utility,pa]", "audit.common_draw=9")), data, tokenizer)
    run, *_ = checked_plan(from_dict(compose("audit.methods=[utility,pa,pearl]", "audit.common_draw=3",
                                          "audit.pearl.n=3")), data, tokenizer)
    assert [len(ids) for ids in run.common_draw.values()] == [3, 3]


def test_the_default_draws_hold_the_default_common_draw():
    """PA, the attacks and PEARL draw from the pool's order with the common draw first, so a draw of at least
    audit.common_draw holds it (MR's slice also holds the canaries: the pool's check covers it)."""
    d = compose_dict([])
    for name in ("pa", "mia", "pearl"):
        assert d["audit"][name]["n"] >= d["audit"]["common_draw"] >= 30, name


def test_resolve_writes_each_run_its_own_directory(tmp_path):
    """`fedmem resolve` (for `flwr run`): a new run directory every time, holding the config that names it."""
    outs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-m", "fedmem.cli", "resolve", "strategy.num_rounds=1"],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        outs.append(Path(proc.stdout.strip().splitlines()[-1]))
    assert outs[0] != outs[1] and all(p.name == "config.yaml" and p.is_file() for p in outs)
    for p in outs:
        assert Path(yaml.safe_load(p.read_text())["run_dir"]).resolve() == p.parent.resolve()


@pytest.mark.parametrize("clients,cpus,threads,expected,actors", [
    (3, 2, 1, 0.66, 3), (2, 2, 1, 1.0, 2), (10, 2, 1, 0.5, 4), (3, 16, 2, 5.33, 3), (4, 2, 2, 1.0, 2),
    (2, 16, 1, 8.0, 2)])
def test_auto_client_cpus_run_a_rounds_clients_at_once_up_to_two_per_core(compose, monkeypatch, clients, cpus,
                                                                         threads, expected, actors):
    """The share, and the ClientApp actors Flower starts for it: a round's clients at once where the cores allow,
    and no actor more than a round has clients (each would import torch and peft for nothing)."""
    from flwr.simulation.ray_transport.ray_actor import pool_size_from_resources

    from fedmem.config.experiment import from_dict
    from fedmem.experiment.preflight import client_cpus

    monkeypatch.setattr("os.cpu_count", lambda: cpus)
    auto = ["simulation.num_cpus_per_client=auto", f"data.num_clients={clients}", f"simulation.torch_threads={threads}"]
    cfg = from_dict(compose(*auto))
    assert client_cpus(cfg) == expected
    monkeypatch.setattr("ray.nodes", lambda: [{"Alive": True, "Resources": {"CPU": float(cpus)}}])
    assert pool_size_from_resources({"num_cpus": client_cpus(cfg), "num_gpus": 0.0}) == actors
    assert client_cpus(from_dict(compose("simulation.num_cpus_per_client=1.5"))) == 1.5  # a number is kept
    # Ray's word for a private instance is no cluster: auto shares this machine's cores as without an address
    assert client_cpus(from_dict(compose(*auto, "simulation.ray_address=local"))) == expected


def test_every_task_yaml_resolves_to_its_registered_preset():
    """conf/task/<name>.yaml names the task and nothing else: composing it gives the preset that fedmem.data.tasks
    registers for it (the values live there once)."""
    from fedmem.config.compose import compose_dict
    from fedmem.data import TaskConfig
    from fedmem.data.tasks import TASKS, task_defaults

    for name, task in TASKS.items():
        composed = compose_dict([f"task={name}"])["task"]
        cfg = TaskConfig(**composed)
        expected = task_defaults(task.template) | task.preset
        expected |= {k: None for k, v in expected.items() if v == ""}  # "" = explicitly none, as TaskConfig reads it
        assert {k: getattr(cfg, k) for k in expected} == expected, name
