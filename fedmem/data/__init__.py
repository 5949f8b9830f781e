"""Data: the paper's tasks and templates, sources (synthetic, Hugging Face, local files), partitioners.

Public API::

    from fedmem.data import TaskConfig, DataConfig, Record, ClientSplit, FederatedData
    from fedmem.data import load_federated, format_prompt, format_example, continuation_header, write_ground_truth, read_ground_truth
"""

from __future__ import annotations

from fedmem.data.config import DataConfig, TaskConfig, check_configs
from fedmem.data.hub import DatasetUnavailableError
from fedmem.data.load import load_federated, validate_federated
from fedmem.data.records import ClientSplit, FederatedData, Record
from fedmem.data.storage import read_ground_truth, write_ground_truth
from fedmem.data.templates import TEMPLATES, continuation_header, format_example, format_prompt

__all__ = [
    "ClientSplit",
    "DataConfig",
    "DatasetUnavailableError",
    "FederatedData",
    "Record",
    "TEMPLATES",
    "TaskConfig",
    "check_configs",
    "continuation_header",
    "format_example",
    "format_prompt",
    "load_federated",
    "read_ground_truth",
    "validate_federated",
    "write_ground_truth",
]
