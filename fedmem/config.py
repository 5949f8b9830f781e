"""The experiment configuration: typed, validated, built from the Hydra tree in conf/.

Hydra composes a DictConfig; :func:`from_dict` turns it into these dataclasses. Every ``__post_init__`` rejects
a bad value with one message naming the key, and :func:`validate` checks the combinations, so a wrong config
fails before any data is loaded or any model is trained.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from fedmem.audit.base import Decoding


def _help(default, text: str, **kw):
    return field(default=default, metadata={"help": text}, **kw)


def _list(default, text: str):
    return field(default_factory=lambda: list(default), metadata={"help": text})


@dataclass
class TinyModelConfig:
    """Architecture and pretraining of the offline tiny preset (a Qwen2 model built from a config)."""

    vocab_size: int = _help(2048, "BPE vocabulary trained on the public corpus")
    hidden_size: int = _help(128, "model width")
    intermediate_size: int = _help(384, "MLP width")
    num_hidden_layers: int = _help(4, "transformer blocks")
    num_attention_heads: int = _help(4, "query heads")
    num_key_value_heads: int = _help(2, "key/value heads (grouped-query attention, as in Qwen2.5)")
    max_position_embeddings: int = _help(512, "longest sequence")
    pretrain_epochs: int = _help(1, "epochs over the public corpus to give the base model a prior")
    pretrain_lr: float = _help(3e-3, "AdamW learning rate for pretraining")
    pretrain_batch_size: int = _help(8, "sequences per pretraining step (more, smaller steps learn faster here)")

    def __post_init__(self):
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("model.tiny.hidden_size must be divisible by model.tiny.num_attention_heads")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("model.tiny.num_attention_heads must be divisible by model.tiny.num_key_value_heads")
        if min(self.vocab_size, self.num_hidden_layers, self.pretrain_batch_size) < 1 or self.pretrain_epochs < 0:
            raise ValueError("model.tiny sizes must be positive")


@dataclass
class ModelConfig:
    """Which base model to fine-tune and how LoRA wraps it."""

    name: str = _help("tiny", "preset name (tiny, qwen2.5-0.5b, ..., llama3.2-3b)")
    path: str | None = _help(None, "Hugging Face id or local directory; None for the tiny preset")
    dtype: str = _help("auto", "auto (bf16 on GPU, fp32 on CPU), float32, bfloat16 or float16")
    max_seq_len: int = _help(256, "training sequences are truncated to this many tokens")
    lora_r: int = _help(16, "LoRA rank")
    lora_alpha: int = _help(32, "LoRA alpha")
    lora_dropout: float = _help(0.05, "LoRA dropout")
    target_modules: list[str] = _list(
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        "LoRA targets: all attention and MLP projections (paper default)",
    )
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig, metadata={"help": "tiny preset only"})

    def __post_init__(self):
        if isinstance(self.tiny, dict):
            self.tiny = TinyModelConfig(**self.tiny)
        if self.name != "tiny" and not self.path:
            raise ValueError(f"model.path is required for model {self.name!r} (a Hugging Face id or local dir)")
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            raise ValueError(f"model.dtype must be auto, float32, bfloat16 or float16, got {self.dtype!r}")
        if self.lora_r < 1 or self.lora_alpha < 1 or not 0 <= self.lora_dropout < 1:
            raise ValueError("model.lora_r and lora_alpha must be >= 1 and 0 <= lora_dropout < 1")
        if not self.target_modules:
            raise ValueError("model.target_modules must name at least one module")


@dataclass
class TrainConfig:
    """Local training (every client, and the centralized baseline)."""

    lr: float = _help(2e-4, "AdamW learning rate (paper 2e-4)")
    batch_size: int = _help(8, "micro-batch (sequences per forward pass)")
    effective_batch: int = _help(64, "sequences per optimizer step via gradient accumulation (paper 64)")
    local_epochs: int = _help(1, "local epochs per round (paper: rounds ~ epochs)")
    weight_decay: float = _help(0.0, "AdamW weight decay")
    max_grad_norm: float = _help(1.0, "gradient clipping; 0 disables")
    progress: bool = _help(True, "show a progress bar")

    def __post_init__(self):
        if self.lr <= 0:
            raise ValueError("train.lr must be > 0")
        if self.batch_size < 1 or self.effective_batch < self.batch_size:
            raise ValueError("train.batch_size must be >= 1 and train.effective_batch >= train.batch_size")
        if self.effective_batch % self.batch_size:
            raise ValueError("train.effective_batch must be a multiple of train.batch_size")
        if self.local_epochs < 1:
            raise ValueError("train.local_epochs must be >= 1")

    @property
    def grad_accum(self) -> int:
        return self.effective_batch // self.batch_size


STRATEGIES = ("fedavg", "fedprox", "fedavgm", "fedadam", "fedyogi", "centralized")


@dataclass
class StrategyConfig:
    """The federated algorithm (or the centralized baseline) and the round schedule."""

    name: str = _help("fedavg", f"one of {STRATEGIES}")
    num_rounds: int = _help(3, "rounds (epochs for centralized)")
    proximal_mu: float = _help(0.0, "FedProx mu (sent by the server; paper default 0.01)")
    fraction_train: float = _help(1.0, "fraction of clients sampled per round")
    min_train_nodes: int = _help(1, "minimum clients per round")
    server_lr: float = _help(1e-2, "server learning rate (FedAdam, FedYogi)")
    server_momentum: float = _help(0.9, "server momentum (FedAvgM)")

    def __post_init__(self):
        if self.name not in STRATEGIES:
            raise ValueError(f"strategy.name must be one of {STRATEGIES}, got {self.name!r}")
        if self.num_rounds < 0:
            raise ValueError("strategy.num_rounds must be >= 0")
        if self.proximal_mu < 0:
            raise ValueError("strategy.proximal_mu must be >= 0")
        if self.proximal_mu > 0 and self.name != "fedprox":
            raise ValueError(f"strategy.proximal_mu is only used by fedprox, not {self.name!r}")
        if not 0 < self.fraction_train <= 1:
            raise ValueError("strategy.fraction_train must be in (0, 1]")


AUDIT_METHODS_DEFAULT = ("utility", "mr", "pearl", "pa")


@dataclass
class AuditConfig:
    """What is audited after every round (and at round 0), and with which shared settings."""

    methods: list[str] = _list(AUDIT_METHODS_DEFAULT, "enabled audit methods, by registry name")
    prefix_len: int = _help(30, "prefix tokens of the memorization text (paper default 30)")
    suffix_len: int = _help(64, "suffix tokens = generation budget (max_new_tokens)")
    samples_per_client: int = _help(64, "train samples per client prepared for auditing (fixed per run)")
    test_per_client: int = _help(32, "test samples per client prepared (non-members, utility)")
    decoding: Decoding = field(default_factory=Decoding, metadata={"help": "decoding preset (conf/audit/decoding)"})
    batch_size: int = _help(64, "sequences per generation / scoring batch")
    reveal_text: bool = _help(False, "show leaked text excerpts in reports instead of hash + length")
    sections: dict[str, Any] = field(default_factory=dict, metadata={"help": "per-method config sections"})

    def __post_init__(self):
        if isinstance(self.decoding, dict):
            self.decoding = Decoding(**self.decoding)
        if self.prefix_len < 1 or self.suffix_len < 1:
            raise ValueError("audit.prefix_len and audit.suffix_len must be >= 1")
        if self.prefix_len > self.suffix_len:
            raise ValueError(
                f"audit.prefix_len ({self.prefix_len}) is longer than the suffix budget audit.suffix_len "
                f"({self.suffix_len}); raise audit.suffix_len or shorten the prefix"
            )
        if self.samples_per_client < 1 or self.test_per_client < 1:
            raise ValueError("audit.samples_per_client and audit.test_per_client must be >= 1")


@dataclass
class SimulationConfig:
    """How the Flower simulation runs the clients."""

    backend: str = _help("ray", "Flower simulation backend")
    num_cpus_per_client: float = _help(1.0, "Ray CPUs per ClientApp (2 clients run at once on 2 cores)")
    num_gpus_per_client: float = _help(0.0, "Ray GPUs per ClientApp")
    torch_threads: int = _help(1, "torch threads inside each ClientApp")

    def __post_init__(self):
        if self.num_cpus_per_client <= 0 or self.torch_threads < 1:
            raise ValueError("simulation.num_cpus_per_client must be > 0 and simulation.torch_threads >= 1")


@dataclass
class ExperimentConfig:
    task: Any  # fedmem.data.TaskConfig
    data: Any  # fedmem.data.DataConfig
    model: ModelConfig
    train: TrainConfig
    strategy: StrategyConfig
    audit: AuditConfig
    simulation: SimulationConfig
    seed: int = 0
    run_dir: str = "runs/latest"
    cache_dir: str = ".cache/fedmem"

    @property
    def num_clients(self) -> int:
        return int(self.data.num_clients)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict in the layout of conf/ (method sections back under ``audit``): ``from_dict`` inverts it."""
        d = dataclasses.asdict(self)
        d["audit"] = {**{k: v for k, v in d["audit"].items() if k != "sections"}, **d["audit"]["sections"]}
        return d

    def hash(self) -> str:
        """A short hash of everything that changes results (not where they are written)."""
        d = self.to_dict()
        d.pop("run_dir", None)
        d.pop("cache_dir", None)
        d["train"].pop("progress", None)
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _section(cls, d: dict[str, Any] | None, name: str):
    d = dict(d or {})
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ValueError(f"{name}: unknown option(s) {unknown}; known: {sorted(known)}")
    return cls(**d)


def from_dict(d: dict[str, Any]) -> ExperimentConfig:
    """Build and validate the whole configuration from a plain (resolved) dict."""
    from fedmem.data import DataConfig, TaskConfig

    d = dict(d)
    audit = dict(d.get("audit") or {})
    methods = audit.get("methods", list(AUDIT_METHODS_DEFAULT))
    shared = {f.name for f in dataclasses.fields(AuditConfig)} - {"sections"}
    # method sections sit under `audit` (conf/ layout); an explicit `sections` key is accepted too
    sections = {**(audit.pop("sections", None) or {}), **{k: v for k, v in audit.items() if k not in shared}}
    audit = {k: v for k, v in audit.items() if k in shared}
    cfg = ExperimentConfig(
        task=_section(TaskConfig, d.get("task"), "task"),
        data=_section(DataConfig, d.get("data"), "data"),
        model=_section(ModelConfig, d.get("model"), "model"),
        train=_section(TrainConfig, d.get("train"), "train"),
        strategy=_section(StrategyConfig, d.get("strategy"), "strategy"),
        audit=_section(AuditConfig, {**audit, "methods": list(methods), "sections": sections}, "audit"),
        simulation=_section(SimulationConfig, d.get("simulation"), "simulation"),
        seed=int(d.get("seed", 0)),
        run_dir=str(d.get("run_dir", "runs/latest")),
        cache_dir=str(d.get("cache_dir", ".cache/fedmem")),
    )
    validate(cfg)
    return cfg


def validate(cfg: ExperimentConfig) -> None:
    """Cross-section checks and every enabled audit method's own config: all before training starts."""
    import fedmem.audit  # noqa: F401  (registers the built-in methods)
    from fedmem.audit.base import AUDIT_METHODS, build_method_config

    from fedmem.data import check_configs

    if cfg.num_clients < 1:
        raise ValueError(f"data.num_clients must be >= 1, got {cfg.num_clients}")
    check_configs(cfg.task, cfg.data)
    if cfg.strategy.name != "centralized" and cfg.strategy.min_train_nodes > cfg.num_clients:
        raise ValueError(
            f"strategy.min_train_nodes ({cfg.strategy.min_train_nodes}) exceeds data.num_clients ({cfg.num_clients})"
        )
    if cfg.audit.prefix_len + cfg.audit.suffix_len > cfg.model.max_seq_len * 4:
        raise ValueError("audit.prefix_len + audit.suffix_len is far beyond model.max_seq_len")
    for name in cfg.audit.methods:
        if name not in AUDIT_METHODS:
            raise ValueError(f"audit.methods: unknown method {name!r}; known: {sorted(AUDIT_METHODS)}")
        method_cfg = build_method_config(name, cfg.audit.sections.get(name))
        if (name == "pa" and method_cfg.generic is None and method_cfg.n_ratio is None
                and method_cfg.generic_source == "public" and cfg.data.source != "synthetic"):
            raise ValueError(f"audit.pa.generic_source=public needs the synthetic source's public corpus (data.source="
                             f"{cfg.data.source}); use audit.pa.generic_source=appendix_b or give audit.pa.generic")
