"""Data: the paper's tasks and templates, sources (synthetic, Hugging Face, local files), partitioners, and the
per-client deduplication run before training (``data.dedup``).

Public API::

    from fedmem.data import TaskConfig, DataConfig, Record, ClientSplit, FederatedData
    from fedmem.data import DataSourceConfig, register_source   # a data source of your own (fedmem.data.sources)
    from fedmem.data import Task, register_task                 # a task of your own (fedmem.data.tasks)
    from fedmem.data import load_federated, format_prompt, format_example, continuation_header, write_ground_truth, read_ground_truth
"""

from __future__ import annotations

from fedmem.data import sources  # noqa: F401  (registers every data source)
from fedmem.data.config import (
    DATA_SOURCES,
    DataConfig,
    DataSourceConfig,
    TaskConfig,
    check_configs,
    register_source,
)
from fedmem.data.hub import DatasetUnavailableError
from fedmem.data.load import load_federated, validate_federated
from fedmem.data.records import ClientSplit, FederatedData, Record
from fedmem.data.storage import read_ground_truth, write_ground_truth
from fedmem.data.tasks import TASKS, Task, register_task
from fedmem.data.templates import (
    TEMPLATES,
    continuation_header,
    format_example,
    format_prompt,
)

__all__ = [
    "ClientSplit",
    "DATA_SOURCES",
    "DataConfig",
    "DataSourceConfig",
    "DatasetUnavailableError",
    "FederatedData",
    "Record",
    "TASKS",
    "TEMPLATES",
    "Task",
    "TaskConfig",
    "check_configs",
    "continuation_header",
    "format_example",
    "format_prompt",
    "load_federated",
    "read_ground_truth",
    "register_task",
    "register_source",
    "validate_federated",
    "write_ground_truth",
]
