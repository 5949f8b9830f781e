"""Task and data-source configuration (``conf/task/*.yaml``, ``conf/data/*.yaml``).

``TaskConfig`` says *what* a sample is (template, memorization text, the dataset's columns, how the paper
splits it into clients); ``DataConfig`` says *where* samples come from and how many (synthetic, Hugging Face
or local files; sizes; what the synthetic source plants). Every ``__post_init__`` rejects a bad value with one
ValueError naming the key; :func:`check_configs` does the checks that need both.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Literal

from fedmem.config import check_fields, option, option_factory
from fedmem.data.schema import resolve_schema
from fedmem.data.synthetic.vocab import BOILERPLATE
from fedmem.data.tasks import PRESETS
from fedmem.data.templates import TEMPLATES, template_fields

RULE_KEYS = ("any", "all", "none")
FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet", ".jsonl.gz", ".json.gz", ".csv.gz")


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

    Every field left ``None`` is filled from the task's preset (``fedmem.data.tasks.PRESETS``), so
    ``TaskConfig(name="qa")`` is the paper's QA task; ``""`` clears an optional column or name explicitly.
    """

    name: Literal["summarization", "dialog", "qa", "classification", "text"] = option(
        "dialog", "summarization | dialog | qa | classification (the paper's) | text (plain text, no prompt)")
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
        t = TEMPLATES[self.name]
        defaults = {"user_template": t.user, "assistant_template": t.assistant, "mem_field": t.mem_field,
                    **PRESETS[self.name]}
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


MAX_CANARIES = 512  # the canary name pool (32 x 32 name combinations, half of them canary-only, each used once)
SPECIALTY_NAMES = ("cardiology", "dermatology", "gastroenterology", "neurology", "pulmonology")


@dataclass
class DataConfig:
    """Where the samples come from, how many, and (synthetic source) what ground truth to plant.

    Seed-independent: the seed is an argument of ``load_federated``.
    """

    source: Literal["synthetic", "hf", "local"] = option(
        "synthetic", "synthetic (offline default) | hf (Hugging Face datasets) | local (files)")
    path: str | None = option(
        None, "local .jsonl/.csv/.parquet file, glob or directory: required for local; for hf, files in the hub schema"
    )
    columns: dict[str, str] = option_factory({}, "template field -> column, overriding task.columns")
    client_column: str | None = option(None, "override task.client_column (then one client per distinct value)")
    client_groups: dict[str, Any] | None = option(None, "override the client groups (see task.client_groups)")
    group_by: Literal["tags", "keywords"] | None = option(None, "override task.group_by")
    label_column: str | None = option(None, "override task.label_column")
    id_column: str | None = option(
        None, "local / hf: the column holding each row's id, used in reports and ground truth (ids must be unique "
        "and non-empty); None = the row number, row<i>")
    membership_column: str | None = option(
        None, "local / hf: the column saying what each row is to the model: train (it was trained on the row), test "
        "(it was not) or public (public text). Each client's train and test rows are then drawn from the rows so "
        "marked, not split by fedmem; an audit of a model fedmem did not train needs it for the methods that "
        "compare members with non-members")
    num_clients: int = option(3, "number of clients L")
    train_per_client: int = option(700, "train samples per client |D_j| (paper 27k), canary copies included")
    test_per_client: int = option(40, "test samples per client (paper 3k)")
    # ---- Hugging Face and local sources: the public corpus (the tiny preset's tokenizer and prior, PA's calibration)
    public: str | None = option(
        None, "the public corpus: a file (.jsonl/.csv/.parquet; its memorization-text column, or 'text') or a column "
        "of the data whose true values (true/1/yes/public) mark public rows; None = data.public_share"
    )
    public_share: float = option(
        0.2, "without data.public: the seeded share of each client's rows moved to the public corpus before the "
        "train/test split (never trained on as client data nor audited); 0 = no public corpus"
    )
    # ---- synthetic source only
    specialties: list[str] = option_factory(
        list(SPECIALTY_NAMES), "synthetic: client j's clinical specialty is specialties[j] (cycled if fewer)"
    )
    canary_copies: list[int] = option_factory(
        [1, 2, 4, 8, 16], "synthetic: the copy counts; each gets its own canaries")
    canaries_per_count: int = option(1, "synthetic: canaries per copy count in every canary client")
    shared_canary_copies: list[int] = option_factory(
        [3, 6, 12, 24], "synthetic: copy counts of shared canaries, one canary per count whose copies are dealt "
        "round-robin over the canary clients (the same record held by several clients); FedAvg averages a client's "
        "own canary with updates that never saw it, but every holder's update pushes a shared one"
    )
    canary_clients: list[int] | None = option(None, "synthetic: the clients that receive canaries (None = all)")
    generic_fraction: float = option(0.2, "synthetic: share of ordinary samples ending in shared boilerplate")
    num_boilerplates: int = option(4, "synthetic: how many boilerplate closings the clients share")
    public_size: int = option(2000, "synthetic: public-corpus paragraphs (tiny tokenizer and base-model prior)")
    public_generic_fraction: float = option(0.3, "synthetic: share of public paragraphs ending in boilerplate")
    public_record_fraction: float = option(
        0.25, "synthetic: share of public paragraphs that are record notes in the canary format, of other people"
    )

    def __post_init__(self):
        if self.path == "???":  # OmegaConf's mandatory marker, left unset (conf/data/local.yaml)
            self.path = None
        if self.source == "local" and not self.path:
            raise ValueError("data.source=local needs data.path (a .jsonl, .csv or .parquet file)")
        if self.source == "synthetic" and self.path:
            raise ValueError("data.path is not used by data.source=synthetic; set data.source=local or hf")
        if self.source == "synthetic" and self.id_column:
            raise ValueError("data.id_column is not used by data.source=synthetic (its ids are its own)")
        if self.path and "*" not in str(self.path) and "." in str(self.path).rsplit("/", 1)[-1]:
            if not str(self.path).lower().endswith(FILE_SUFFIXES):
                raise ValueError(f"data.path must be a .jsonl, .json, .csv or .parquet file, got {self.path!r}")
        self.columns = {str(k): str(v) for k, v in dict(self.columns or {}).items()}
        check_fields(self, "data")
        if self.client_groups is not None:
            self.client_groups = normalize_groups(self.client_groups, "data.client_groups")
        if self.num_clients < 1:
            raise ValueError(f"data.num_clients must be >= 1, got {self.num_clients}")
        if self.train_per_client < 1 or self.test_per_client < 1:
            raise ValueError(
                f"data.train_per_client and data.test_per_client must be >= 1, got "
                f"{self.train_per_client} and {self.test_per_client}"
            )
        self.specialties = [str(s) for s in self.specialties]
        unknown = [s for s in self.specialties if s not in SPECIALTY_NAMES]
        if not self.specialties or unknown:
            raise ValueError(f"data.specialties must name some of {list(SPECIALTY_NAMES)}, got {self.specialties}")
        self.canary_copies = [int(c) for c in self.canary_copies]
        if any(c < 1 for c in self.canary_copies) or len(set(self.canary_copies)) != len(self.canary_copies):
            raise ValueError(f"data.canary_copies must be distinct counts >= 1, got {self.canary_copies}")
        self.shared_canary_copies = [int(c) for c in self.shared_canary_copies]
        if any(c < 2 for c in self.shared_canary_copies) or len(set(self.shared_canary_copies)) != len(
                self.shared_canary_copies):
            raise ValueError(f"data.shared_canary_copies must be distinct counts >= 2, got {self.shared_canary_copies}")
        if self.canaries_per_count < 0:
            raise ValueError(f"data.canaries_per_count must be >= 0, got {self.canaries_per_count}")
        if self.canary_clients is not None:
            self.canary_clients = sorted({int(c) for c in self.canary_clients})
            bad = [c for c in self.canary_clients if not 0 <= c < self.num_clients]
            if bad or not self.canary_clients:
                raise ValueError(
                    f"data.canary_clients must list client indices in [0, {self.num_clients}), "
                    f"got {self.canary_clients}"
                )
        if not 0 <= self.generic_fraction < 1 or not 0 <= self.public_generic_fraction < 1:
            raise ValueError("data.generic_fraction and data.public_generic_fraction must be in [0, 1)")
        if not 0 <= self.public_record_fraction or self.public_generic_fraction + self.public_record_fraction >= 1:
            raise ValueError("data.public_record_fraction must be >= 0 and, with public_generic_fraction, below 1")
        if not 1 <= self.num_boilerplates <= len(BOILERPLATE):
            raise ValueError(f"data.num_boilerplates must be in [1, {len(BOILERPLATE)}], got {self.num_boilerplates}")
        if not 0 <= self.public_share < 1:
            raise ValueError(f"data.public_share must be in [0, 1), got {self.public_share}")
        if self.source == "synthetic" and self.public:
            raise ValueError("data.public is for data.source=local or hf; the synthetic source makes its own "
                             "public corpus (data.public_size)")
        if self.membership_column and self.source == "synthetic":
            raise ValueError("data.membership_column is for data.source=local or hf; the synthetic source splits its "
                             "own records")
        if self.membership_column and self.public:
            raise ValueError("data.membership_column marks the public rows itself (value public): unset data.public")
        if self.public_size < 0:
            raise ValueError(f"data.public_size must be >= 0, got {self.public_size}")
        if self.source == "synthetic" and self.num_canaries() > MAX_CANARIES:
            raise ValueError(f"data: {self.num_canaries()} canaries requested, at most {MAX_CANARIES} (unique names)")
        most = max(self.canary_copies_by_client().values()) if self.source == "synthetic" else 0
        if most >= self.train_per_client:
            raise ValueError(
                f"data: a canary client holds {most} canary copies (canaries_per_count x sum(canary_copies), plus "
                f"its share of shared_canary_copies), which must be fewer than "
                f"data.train_per_client={self.train_per_client}; raise train_per_client or plant fewer canaries"
            )

    @property
    def has_public_corpus(self) -> bool:
        """The synthetic source makes one; local and hub data have one unless the share is 0 with no file or column."""
        return self.source == "synthetic" or bool(self.public) or self.public_share > 0 or bool(self.membership_column)

    def canary_holders(self) -> list[int]:
        return list(range(self.num_clients)) if self.canary_clients is None else list(self.canary_clients)

    def num_canaries(self) -> int:
        return len(self.canary_copies) * self.canaries_per_count * len(self.canary_holders()) + len(
            self.shared_canary_copies)

    def shared_copy_clients(self, t: int) -> list[int]:
        """The client of each copy of shared canary number ``t``: round-robin over the canary clients, starting one
        further along for every canary so that the remainders do not all land on the first client."""
        holders = self.canary_holders()
        return [holders[(t + m) % len(holders)] for m in range(self.shared_canary_copies[t])]

    def canary_copies_by_client(self) -> dict[int, int]:
        """Canary copies (own and shared) in each client's train split (synthetic source)."""
        out = {c: 0 for c in range(self.num_clients)}
        for c in self.canary_holders():
            out[c] += self.canaries_per_count * sum(self.canary_copies)
        for t in range(len(self.shared_canary_copies)):
            for c in self.shared_copy_clients(t):
                out[c] += 1
        return out


def check_configs(task: TaskConfig, data: DataConfig) -> None:
    """Checks that need both configs and no data: call it before any loading or training."""
    if data.source == "synthetic":
        if task.name != "dialog":
            raise ValueError(
                f"data.source=synthetic generates clinical dialogs: use task=dialog (got task={task.name}), or "
                f"data=hf / data=local for task={task.name}"
            )
        if task.mem_field != "patient" or set(task.fields) - {"patient", "doctor"}:
            raise ValueError("data.source=synthetic fills the fields {patient} and {doctor} only; "
                             "task.user_template / assistant_template / mem_field must use just those")
        return
    resolve_schema(task, data)
