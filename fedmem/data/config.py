"""Task and data-source configuration (``conf/task/*.yaml``, ``conf/data/*.yaml``).

``TaskConfig`` says *what* a sample is (template, memorization text, the dataset's columns, how the paper
splits it into clients); a data source's config (``DataSourceConfig`` and one subclass per source, in
``fedmem.data.sources``) says *where* samples come from and how many. Every ``__post_init__`` rejects a bad value
with one ValueError naming the key; :func:`check_configs` does the checks that need both.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

from fedmem.common import registry
from fedmem.common.fields import build_variant, check_fields, option
from fedmem.data.tasks import task_defaults, task_named
from fedmem.data.templates import template_fields

RULE_KEYS = ("any", "all", "none")


def normalize_groups(groups: Any, key: str) -> dict[str, dict[str, list[str]]]:
    """``{name: rule}``; a rule is ``{"any": [...], "all": [...], "none": [...]}`` (a plain list means ``any``)."""
    if groups is None:
        return {}
    if not isinstance(groups, dict):
        raise ValueError(f"{key} must be a mapping of client name -> rule, got {type(groups).__name__}")
    out: dict[str, dict[str, list[str]]] = {}
    for name, rule in groups.items():
        if isinstance(rule, (list, tuple)):
            rule = {"any": list(rule)}
        if not isinstance(rule, dict) or not rule or set(rule) - set(RULE_KEYS):
            raise ValueError(f"{key}.{name} must be a list of values or a mapping with keys any/all/none, got {rule!r}")
        clean = {k: [str(v) for v in (rule.get(k) or [])] for k in RULE_KEYS if rule.get(k)}
        if not clean.get("any") and not clean.get("all"):
            raise ValueError(f"{key}.{name} needs a non-empty 'any' or 'all' list ('none' alone matches too much)")
        out[str(name)] = clean
    return out


@dataclass
class TaskConfig:
    """One of the paper's four tasks: template (SPEC §2), where its data lives, how it is split and scored.

    Every field left ``None`` is filled from the task's registered preset (``fedmem.data.tasks.TASKS``), so
    ``TaskConfig(name="qa")`` is the paper's QA task (a task of one's own: ``fedmem.data.tasks.register_task``); ``""`` clears an optional column or name explicitly.
    """

    name: str = option("dialog", "summarization | dialog | qa | classification (the paper's) | text (plain text, no "
                       "prompt) | a task a plugin registers")
    format: Literal["chat", "plain"] | None = option(
        None, "chat: the user and assistant turns in the tokenizer's chat template | plain: the user turn alone as "
        "running text (trained as continuation; the audits' prompt is the bare prefix)")
    user_template: str | None = option(None, "user turn, a format string over the task's fields (SPEC §2 Table 6)")
    assistant_template: str | None = option(None, "assistant turn, a format string over the task's fields")
    mem_field: str | None = option(None, "the field holding the memorization text (prefix + suffix source)")
    hf_dataset: str | None = option(None, "Hugging Face dataset id (source=hf without data.path)")
    hf_config: str | None = option(None, "dataset config name ('' for none)")
    hf_split: str | None = option(None, "split to read; fedmem makes its own train/test split per client")
    columns: dict[str, str] | None = option(None, "template field -> column (dotted paths reach nested fields)")
    client_column: str | None = option(None, "natural partition: the column that decides the client ('' = none)")
    client_groups: dict[str, Any] | None = option(
        None,
        "natural partition: client name -> rule {any: [...], all: [...], none: [...]} over the client column's "
        "values (group_by=tags) or keywords in its text (group_by=keywords); {} = one client per distinct value",
    )
    group_by: Literal["tags", "keywords"] | None = option(
        None, "tags (list/category values) | keywords (word-boundary matches in text)")
    tag_separator: str | None = option(None, "group_by=tags: also split each value on this ('' = keep values whole)")
    label_column: str | None = option(None, "label column (classification target; Dirichlet partition; '' = none)")
    labels: list[str] | None = option(None, "classification label set; labels are matched case-insensitively")
    partition: Literal["natural", "dirichlet", "iid"] | None = option(None, "natural | dirichlet | iid")
    dirichlet_alpha: float = option(5.0, "Dirichlet concentration (paper: 5.0 for classification)")
    metric: Literal["rouge", "accuracy"] | None = option(None, "utility metric: rouge (ROUGE-L + BLEU) or accuracy")
    pearl_metric: Literal["ncd", "rouge_l"] | None = option(
        None, "PEARL performance: ncd (completion-style) or rouge_l (summary-style)")

    def __post_init__(self):
        check_fields(self, "task")
        t = task_named(self.name).template
        defaults = {"user_template": t.user, "assistant_template": t.assistant, "mem_field": t.mem_field,
                    **task_defaults(t), **task_named(self.name).preset}
        for key, value in defaults.items():
            if getattr(self, key) is None:
                setattr(self, key, copy.deepcopy(value))
        for key in ("hf_config", "client_column", "label_column", "tag_separator"):  # "" = explicitly none
            if getattr(self, key) == "":
                setattr(self, key, None)
        self.columns = {str(k): str(v) for k, v in dict(self.columns).items()}
        self.labels = [str(x) for x in self.labels]
        self.client_groups = normalize_groups(self.client_groups, "task.client_groups")
        check_fields(self, "task")  # again, with the preset's values filled in

        try:
            fields = template_fields(self.user_template, self.assistant_template)
        except ValueError as e:  # a stray brace
            raise ValueError(f"task.user_template / assistant_template is not a valid format string: {e}") from None
        if self.mem_field not in template_fields(self.user_template):
            raise ValueError(f"task.user_template must contain {{{self.mem_field}}} (task.mem_field), "
                             f"got {self.user_template!r}")
        missing = [f for f in fields if f not in self.columns]
        if missing:
            raise ValueError(f"task.columns has no column for template field(s) {missing}; got {self.columns}")
        if not self.dirichlet_alpha > 0:
            raise ValueError(f"task.dirichlet_alpha must be > 0, got {self.dirichlet_alpha}")
        if self.metric == "accuracy" and not self.labels:
            raise ValueError("task.metric=accuracy needs task.labels (the label set)")
        if self.client_groups and not self.client_column:
            raise ValueError("task.client_groups needs task.client_column (the column the groups are read from)")

    @property
    def plain(self) -> bool:
        """Running text: no chat template, the audits' prompt is the bare prefix (``format: plain``)."""
        return self.format == "plain"

    @property
    def fields(self) -> list[str]:
        """The template fields, in order of first use."""
        return template_fields(self.user_template, self.assistant_template)


MAX_DEDUP_THRESHOLD = 0.98  # the highest similarity MinHash LSH with fedmem.data.dedup's 128 permutations can band


@dataclass
class DataSourceConfig:
    """Where the samples come from and how many: the settings every source shares. Each source is a subclass with
    its own settings, checks and loader, registered under its ``data.source`` name (:func:`register_source`); the
    ``data`` section of the config holds the shared settings and its source's, side by side.

    Seed-independent: the seed is an argument of ``load``.
    """

    source: str = option("synthetic", "synthetic (offline default) | hf (Hugging Face datasets) | local (files) | "
                         "a source registered by a plugin")
    num_clients: int = option(3, "number of clients L")
    train_per_client: int = option(700, "train samples per client |D_j| (paper 27k), canary copies included")
    test_per_client: int = option(40, "test samples per client (paper 3k)")
    dedup: Literal["off", "exact", "near"] = option(
        "off", "remove duplicates within each client's training data before training: exact (the same "
        "memorization text) or near (also texts whose word-shingle MinHash Jaccard similarity reaches "
        "dedup_threshold); held-out data is left as it is")
    dedup_threshold: float = option(0.8, "near: the estimated Jaccard similarity at which two texts are duplicates")
    # the privacy audits' plants (fedmem.data.audit_canaries, docs/spec.md §10)
    audit_canaries: int = option(
        0, "audit canaries m of the one-run privacy audit (audit.one_run): random word strings, each trained on (in "
           "one random client's training split) with probability 1/2; 0 = none, the data as it is (the synthetic "
           "source plants 128, four copies each)")
    audit_canary_copies: int = option(1, "copies of a member audit canary in its client's training split")
    audit_canary_words: int = option(16, "words per audit canary, drawn uniformly from the data's vocabulary")
    audit_canary_clients: int = option(
        0, "canary clients of the client-level privacy audit: clients with no data whose update is a fixed random "
           "direction, sampled, clipped and noised like the real clients; 0 = none")

    def __post_init__(self):
        check_fields(self, "data")
        if not 0 < self.dedup_threshold <= MAX_DEDUP_THRESHOLD:
            raise ValueError(f"data.dedup_threshold must be in (0, {MAX_DEDUP_THRESHOLD}] (above, MinHash's bands cannot "
                             f"tell; dedup=exact removes identical texts), got {self.dedup_threshold}")
        if self.num_clients < 1:
            raise ValueError(f"data.num_clients must be >= 1, got {self.num_clients}")
        for key in ("audit_canaries", "audit_canary_clients"):
            if getattr(self, key) < 0:
                raise ValueError(f"data.{key} must be >= 0, got {getattr(self, key)}")
        for key in ("audit_canary_copies", "audit_canary_words"):
            if getattr(self, key) < 1:
                raise ValueError(f"data.{key} must be >= 1, got {getattr(self, key)}")
        if self.train_per_client < 1 or self.test_per_client < 1:
            raise ValueError(
                f"data.train_per_client and data.test_per_client must be >= 1, got "
                f"{self.train_per_client} and {self.test_per_client}"
            )

    @property
    def has_public_corpus(self) -> bool:
        """Whether the source supplies a public corpus (the tiny preset's tokenizer and prior, PA's calibration)."""
        return False

    @property
    def marks_membership(self) -> bool:
        """Whether the data itself says which rows a model was trained on (an external audit's members)."""
        return False

    def check_task(self, task: TaskConfig) -> None:
        """Checks that need the task as well, before anything is loaded. Raise ValueError naming the key."""

    def load(self, task: TaskConfig, seed: int, cache_dir: str | None = None):
        """The clients' train/test splits (``fedmem.data.FederatedData``); deterministic in ``seed``."""
        raise NotImplementedError


DATA_SOURCES: dict[str, type[DataSourceConfig]] = {}


def register_source(*names: str):
    """Class decorator: ``cls`` is the config and loader of the data sources called ``names`` (``data.source``)."""
    def add(cls: type[DataSourceConfig]) -> type[DataSourceConfig]:
        for name in names:
            registry.add(DATA_SOURCES, name, cls, "data source")
        return cls
    return add


def source_config(name: str) -> type[DataSourceConfig]:
    return registry.named(DATA_SOURCES, name, "data.source", "source")


def DataConfig(source: str = "synthetic", **settings) -> DataSourceConfig:  # noqa: N802 (reads as a config class)
    """The config of data source ``source`` from its settings (its class's fields). A setting of another source is
    refused by name, saying which source reads it, unless it holds that source's default (a config written before
    the sources had settings of their own holds every source's)."""
    return build_variant(source_config(source), {"source": source, **settings}, "data", DATA_SOURCES, "source")


def check_configs(task: TaskConfig, data: DataSourceConfig) -> None:
    """Checks that need both configs and no data: call it before any loading or training."""
    data.check_task(task)
