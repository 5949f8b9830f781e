"""Task and data-source configuration (conf/task/*.yaml, conf/data/*.yaml)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fedmem.data.templates import TEMPLATES

PARTITIONS = ("natural", "dirichlet", "iid")
SOURCES = ("synthetic", "hf", "local")


def _help(default, text: str):
    return field(default=default, metadata={"help": text})


@dataclass
class TaskConfig:
    """One of the paper's four tasks: template (SPEC §2), where its data lives, how it is split and scored."""

    name: str = _help("dialog", "summarization | dialog | qa | classification")
    hf_dataset: str | None = _help(None, "Hugging Face dataset id (online source)")
    hf_config: str | None = _help(None, "dataset config name")
    hf_split: str = _help("train", "split to read; fedmem makes its own train/test split per client")
    columns: dict[str, str] = field(default_factory=dict, metadata={"help": "template field -> column"})
    client_column: str | None = _help(None, "natural partition: the column naming the client group")
    client_groups: dict[str, list[str]] = field(
        default_factory=dict, metadata={"help": "natural partition: client -> values (or keywords) of client_column"})
    label_column: str | None = _help(None, "label column (classification; Dirichlet partitions)")
    partition: str = _help("natural", "natural | dirichlet | iid")
    dirichlet_alpha: float = _help(5.0, "Dirichlet concentration (paper: 5.0 for classification)")
    metric: str = _help("rouge", "utility metric: rouge (ROUGE-L + BLEU) or accuracy")
    pearl_metric: str = _help("ncd", "PEARL performance: ncd (completion-style) or rouge_l (summary-style)")

    def __post_init__(self):
        if self.name not in TEMPLATES:
            raise ValueError(f"task.name must be one of {sorted(TEMPLATES)}, got {self.name!r}")
        if self.partition not in PARTITIONS:
            raise ValueError(f"task.partition must be one of {PARTITIONS}, got {self.partition!r}")
        if self.partition == "natural" and self.client_groups and not self.client_column:
            raise ValueError("task.client_groups needs task.client_column")
        if self.partition == "dirichlet" and (not self.label_column or self.dirichlet_alpha <= 0):
            raise ValueError("task.partition=dirichlet needs task.label_column and task.dirichlet_alpha > 0")
        if self.metric not in ("rouge", "accuracy") or self.pearl_metric not in ("ncd", "rouge_l"):
            raise ValueError("task.metric must be rouge|accuracy and task.pearl_metric ncd|rouge_l")


@dataclass
class DataConfig:
    """Where the samples come from, how many, and (synthetic) what ground truth to plant."""

    source: str = _help("synthetic", "synthetic (offline default) | hf (Hugging Face datasets) | local (files)")
    path: str | None = _help(None, "local .jsonl/.csv/.parquet file (source=local, or hf offline)")
    num_clients: int = _help(3, "number of clients L")
    train_per_client: int = _help(300, "train samples per client (paper 27k)")
    test_per_client: int = _help(40, "test samples per client (paper 3k)")
    canary_copies: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16],
                                     metadata={"help": "synthetic: copies of each canary (one canary per count)"})
    canaries_per_count: int = _help(1, "synthetic: canaries per copy count and client")
    generic_fraction: float = _help(0.15, "synthetic: share of samples ending in shared boilerplate")
    public_size: int = _help(2000, "synthetic: public-corpus paragraphs (pretrains the tiny preset)")

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"data.source must be one of {SOURCES}, got {self.source!r}")
        if self.num_clients < 1:
            raise ValueError(f"data.num_clients must be >= 1, got {self.num_clients}")
        if self.train_per_client < 1 or self.test_per_client < 1:
            raise ValueError("data.train_per_client and data.test_per_client must be >= 1")
        if self.source == "local" and not self.path:
            raise ValueError("data.source=local needs data.path (a .jsonl, .csv or .parquet file)")
        if any(c < 1 for c in self.canary_copies) or not 0 <= self.generic_fraction < 1:
            raise ValueError("data.canary_copies must be >= 1 and 0 <= data.generic_fraction < 1")
