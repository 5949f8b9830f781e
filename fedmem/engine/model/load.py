"""Loading base models (tiny preset, Hugging Face checkpoints or GGUF files) and wrapping them with LoRA.

Only the LoRA adapter ever leaves a process: :func:`adapter_state` / :func:`load_adapter_state` are the two
ends of the wire (peft's ``get_peft_model_state_dict`` / ``set_peft_model_state_dict``).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch

from fedmem.common.io import atomic_dir
from fedmem.common.progress import library_bars
from fedmem.engine.config import ModelConfig
from fedmem.engine.model.gguf import gguf_identity, gguf_model_dir
from fedmem.engine.model.tiny import load_or_build_tiny


def resolve_dtype(name: str) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if torch.cuda.is_available() else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def model_source(cfg: ModelConfig, cache_dir) -> str:
    """What ``from_pretrained`` reads: ``model.path``, or for ``model.gguf_file`` its converted copy under
    ``cache_dir`` (converted on the first call)."""
    return str(gguf_model_dir(cfg, cache_dir)) if cfg.gguf_file else cfg.path


def load_pretrained(cfg: ModelConfig, cache_dir):
    """A Hugging Face causal LM by id or local directory, or from a GGUF file (converted once into ``cache_dir``);
    one clear error when it cannot be had offline."""
    from transformers import AutoModelForCausalLM

    tokenizer = load_tokenizer(cfg, cache_dir)
    try:
        model = AutoModelForCausalLM.from_pretrained(model_source(cfg, cache_dir), dtype=resolve_dtype(cfg.dtype))
    except OSError as e:
        raise ValueError(_unavailable(cfg, e)) from None
    model.eval()
    return model, tokenizer


def _unavailable(cfg: ModelConfig, error: Exception) -> str:
    if cfg.gguf_file:
        return f"model.gguf_file={cfg.gguf_file}: its converted copy could not be read ({error})"
    path = Path(cfg.path).expanduser()
    if (path.is_absolute() or cfg.path.startswith(".")) and not path.is_dir():
        return f"model.path={cfg.path}: no such directory"
    return (f"could not load model {cfg.path!r} ({cfg.name}): not in the local Hugging Face cache and the hub is "
            f"unreachable. Download it elsewhere and set model.path to the local directory. ({error})")


def load_tokenizer(cfg: ModelConfig, cache_dir):
    """The tokenizer of ``model.path`` (or ``model.gguf_file``), with a pad token (its end-of-sequence token where
    it has none)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model_source(cfg, cache_dir))
    except OSError as e:
        raise ValueError(_unavailable(cfg, e)) from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def check_local_model(cfg: ModelConfig) -> None:
    """A model to audit must be local: ``model.path`` a Hugging Face model directory (or ``model.gguf_file``, which
    the config has found already), ``model.adapter`` (if set) a peft adapter directory. One clear error otherwise,
    before anything is loaded."""
    if not cfg.path and not cfg.gguf_file:
        raise ValueError("fedmem audit of a model needs model.path (a local Hugging Face model directory) or "
                         "model.gguf_file")
    for key, value, marker, what in (("model.path", cfg.path, "config.json", "a Hugging Face model directory"),
                                     ("model.adapter", cfg.adapter, "adapter_config.json", "a peft adapter directory")):
        if value is None:
            continue
        if not Path(value).is_dir():
            raise ValueError(f"{key}={value}: no such directory")
        if not (Path(value) / marker).is_file():
            raise ValueError(f"{key}={value}: not {what} (no {marker})")


def load_audited_model(cfg: ModelConfig, cache_dir):
    """(model, tokenizer) of an external model to audit: ``model.path`` (or ``model.gguf_file``), with the peft
    adapter ``model.adapter`` on top when given, on the compute device, in eval mode. Local files only: the hub is
    never contacted."""
    check_local_model(cfg)
    model, tokenizer = load_pretrained(cfg, cache_dir)
    if cfg.adapter:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, cfg.adapter)
    return model.to(device()).eval(), tokenizer


def load_base(cfg: ModelConfig, public_corpus: list[str], seed: int, cache_dir: str, progress: bool = True):
    """(model, tokenizer, where) of the frozen base model; ``progress``: bars while it is built or loaded."""
    with library_bars(progress):
        if cfg.offline:
            return load_or_build_tiny(cfg.tiny, public_corpus, seed, cache_dir, progress)
        model, tokenizer = load_pretrained(cfg, cache_dir)
    return model, tokenizer, base_origin(cfg)


def base_origin(cfg: ModelConfig) -> str:
    """Where a pretrained base comes from, for a summary line: ``model.path``, or the GGUF file and its sha256."""
    ident = gguf_identity(cfg)
    return f"{ident['gguf_file']}, sha256 {ident['gguf_sha256'][:12]}" if ident else cfg.path


def lora_size(model, cfg: ModelConfig) -> int:
    """The weights a LoRA adapter of ``cfg`` (rank r on the target projections) adds to ``model``: r (in + out) per
    adapted linear layer, as peft builds it."""
    import torch

    return sum(cfg.lora_r * (m.in_features + m.out_features) for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and name.rpartition(".")[2] in cfg.target_modules)


def wrap_lora(model, cfg: ModelConfig):
    """LoRA on the configured projections; the base stays frozen. Adapter init is seeded by the caller."""
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=list(cfg.target_modules),
        task_type="CAUSAL_LM",
    )
    with warnings.catch_warnings():
        # Two notices that do not apply here, printed once per process (every Ray actor) otherwise: peft's about a
        # tied output layer among the targets (the tiny preset adapts lm_head on purpose; fedmem merges an adapter
        # only into an untied copy, merged_copy), and transformers' deprecation of a method peft itself calls.
        warnings.filterwarnings("ignore", message=r".*tie_word_embeddings=True.*ensure_weight_tying",
                                category=UserWarning)
        warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing. is deprecated", category=FutureWarning)
        return get_peft_model(model, lora)


def merged_copy(model, state: dict[str, torch.Tensor] | None = None):
    """A plain transformers model that computes what the peft LoRA ``model`` computes, its adapters folded into a
    copy of the weights; ``model`` is left as it was. The audit's generation and scoring run on it: each adapted
    projection becomes one matrix product again, where peft adds two small ones and a sum per call. ``state``: the
    copy carries this adapter (another round's, a client's) instead of the model's own.

    An output layer tied to the input embeddings and adapted by LoRA (the tiny preset) is untied in the copy first:
    merged into the shared matrix, the adapter would change the input embeddings too. A model without adapters is
    returned as it is."""
    if not hasattr(model, "merge_and_unload"):
        return model
    clone = copy_with_adapter(model, state)
    embeddings = clone.get_base_model().get_input_embeddings().weight
    for module in clone.modules():
        base = getattr(module, "base_layer", None)
        if base is not None and getattr(base, "weight", None) is embeddings:
            base.weight = torch.nn.Parameter(embeddings.detach().clone(), requires_grad=False)
    with warnings.catch_warnings():  # peft's advice on untying a tied model for merging: done just above
        warnings.filterwarnings("ignore", message=r".*(tie_word_embeddings|no longer tied)", category=UserWarning)
        merged = clone.merge_and_unload()
    merged.config.tie_word_embeddings = False
    return merged.eval()


def copy_with_adapter(model, state: dict[str, torch.Tensor] | None = None):
    """A copy of the peft LoRA ``model`` carrying the adapter ``state`` (None: its own); ``model`` is left as it was."""
    import copy

    clone = copy.deepcopy(model)
    if state is not None:
        load_adapter_state(clone, state)
    return clone


def adapter_state(model) -> dict[str, torch.Tensor]:
    """The LoRA weights only (what travels between server and clients), detached CPU copies.

    ``save_embedding_layers=False``: with ``lm_head`` among the LoRA targets (the tiny preset) peft would otherwise
    add the frozen base output matrix itself to the state, and every round would ship it both ways.
    """
    from peft import get_peft_model_state_dict

    state = get_peft_model_state_dict(model, save_embedding_layers=False)
    return {k: v.detach().cpu().clone() for k, v in state.items()}


def load_adapter_state(model, state: dict[str, torch.Tensor]) -> None:
    from peft import set_peft_model_state_dict

    result = set_peft_model_state_dict(model, state)
    unexpected = getattr(result, "unexpected_keys", None)
    if unexpected:
        raise ValueError(f"adapter has keys the model does not: {unexpected[:3]}...")


def save_adapter(model, target) -> None:
    """peft's ``save_pretrained`` (adapter weights and config only), replacing ``target`` atomically."""
    with atomic_dir(target) as tmp:
        model.save_pretrained(tmp, save_embedding_layers=False)  # adapter only, also with lm_head targeted
