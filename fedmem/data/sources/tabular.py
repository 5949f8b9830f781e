"""The settings of the table sources (``conf/data/hf.yaml``, ``conf/data/local.yaml``): the task's Hugging Face
dataset, or files of your own in the same columns (the loader: ``fedmem.data.tabular``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fedmem.common.fields import option, option_factory
from fedmem.data.config import (
    DataSourceConfig,
    TaskConfig,
    normalize_groups,
    register_source,
)
from fedmem.data.hub import FILE_SUFFIXES
from fedmem.data.schema import resolve_schema, unset_columns
from fedmem.data.tabular import load_tabular


@register_source("hf", "local")
@dataclass
class TableConfig(DataSourceConfig):
    """Which table, its columns and client partition (overriding the task's), and where the public corpus comes
    from. ``hf``: the task's hub dataset (or ``path``: files in the hub schema); ``local``: ``path`` is required."""

    path: str | None = option(
        None, "local .jsonl/.csv/.parquet file, glob or directory: required for local; for hf, files in the hub schema"
    )
    columns: dict[str, str] = option_factory({}, "template field -> column, overriding task.columns")
    client_column: str | None = option(None, "override task.client_column (then one client per distinct value)")
    client_groups: dict[str, Any] | None = option(None, "override the client groups (see task.client_groups)")
    group_by: Literal["tags", "keywords"] | None = option(None, "override task.group_by")
    label_column: str | None = option(None, "override task.label_column")
    id_column: str | None = option(
        None, "the column holding each row's id, used in reports and ground truth (ids must be unique and "
        "non-empty); None = the row number, row<i>")
    membership_column: str | None = option(
        None, "the column saying what each row is to the model: train (it was trained on the row), test (it was "
        "not) or public (public text). Each client's train and test rows are then drawn from the rows so marked, "
        "not split by fedmem; an audit of a model fedmem did not train needs it for the methods that compare "
        "members with non-members")
    public: str | None = option(
        None, "the public corpus: a file (.jsonl/.csv/.parquet; its memorization-text column, or 'text') or a column "
        "of the data whose true values (true/1/yes/public) mark public rows; None = data.public_share"
    )
    public_share: float = option(
        0.2, "without data.public: the seeded share of each client's rows moved to the public corpus before the "
        "train/test split (never trained on as client data nor audited); 0 = no public corpus"
    )

    def __post_init__(self):
        if self.path == "???":  # OmegaConf's mandatory marker, left unset (conf/data/local.yaml)
            self.path = None
        if self.source == "local" and not self.path:
            raise ValueError("data.source=local needs data.path (a .jsonl, .csv or .parquet file)")
        if self.path and "*" not in str(self.path) and "." in str(self.path).rsplit("/", 1)[-1]:
            if not str(self.path).lower().endswith(FILE_SUFFIXES):
                raise ValueError(f"data.path must be a .jsonl, .json, .csv or .parquet file, got {self.path!r}")
        self.columns = {str(k): str(v) for k, v in dict(self.columns or {}).items()}
        super().__post_init__()
        if self.client_groups is not None:
            self.client_groups = normalize_groups(self.client_groups, "data.client_groups")
        if not 0 <= self.public_share < 1:
            raise ValueError(f"data.public_share must be in [0, 1), got {self.public_share}")
        if self.membership_column and self.public:
            raise ValueError("data.membership_column marks the public rows itself (value public): unset data.public")

    @property
    def has_public_corpus(self) -> bool:
        """One unless the share is 0 with no public file or column."""
        return bool(self.public) or self.public_share > 0 or bool(self.membership_column)

    @property
    def marks_membership(self) -> bool:
        return bool(self.membership_column)

    def check_task(self, task: TaskConfig) -> None:
        schema = resolve_schema(task, self)
        if not self.path and (problems := unset_columns(schema)):  # local files: the loader reads their columns
            raise ValueError("; ".join(problems))

    def load(self, task: TaskConfig, seed: int, cache_dir: str | None = None):
        return load_tabular(task, self, seed, cache_dir)
