"""Reading a table: a Hugging Face dataset id, or local files through the same ``datasets.load_dataset`` path.

Offline machines (this project's CI included) cannot reach the Hub, so every task also accepts local files in
the hub schema: ``datasets.load_dataset("json" | "csv" | "parquet", data_files=...)``. Nested columns become
dotted columns (``context.contexts``) by ``Dataset.flatten()``.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
from pathlib import Path

FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet", ".jsonl.gz", ".json.gz", ".csv.gz")  # what a table file may be

BUILDERS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


class DatasetUnavailableError(RuntimeError):
    """The Hugging Face dataset could not be downloaded (offline, wrong id, no access)."""


def _builder(path: str) -> str:
    name = path.lower()
    for ext in (".gz", ".bz2", ".xz", ".zst"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    for suffix, builder in BUILDERS.items():
        if name.endswith(suffix):
            return builder
    raise ValueError(f"data.path: cannot tell the format of {Path(path).name!r}; use .jsonl, .json, .csv or .parquet")


def local_files(path: str, key: str = "data.path") -> list[str]:
    """The files ``key`` names: one file, a glob, or every supported file in a directory."""
    p = Path(path).expanduser()
    if p.is_dir():
        files = sorted(str(f) for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
        files = [f for f in files if any(f.lower().split(".gz")[0].endswith(s) for s in BUILDERS)]
    elif any(ch in path for ch in "*?["):
        files = sorted(glob.glob(os.path.expanduser(path)))
    else:
        files = [str(p)] if p.is_file() else []
    if not files:
        raise ValueError(f"{key} {path!r} names no readable .jsonl/.json/.csv/.parquet file")
    builders = {_builder(f) for f in files}
    if len(builders) > 1:
        raise ValueError(f"{key} {path!r} mixes file formats {sorted(builders)}; use one format")
    return files


def first_bad_json_line(files: list[str]) -> str | None:
    """'<file>' line N is not JSON: ...' for the first line of a JSON Lines file that does not parse."""
    for f in files:
        if not f.lower().endswith((".jsonl", ".jsonl.gz")):
            continue  # a .json file is one document, not one per line
        opener = gzip.open if f.endswith(".gz") else open
        try:
            with opener(f, "rt", encoding="utf-8") as fh:
                for n, line in enumerate(fh, 1):
                    if line.strip():
                        try:
                            json.loads(line)
                        except ValueError as e:
                            return f"{f!r} line {n} is not JSON: {e}"
        except UnicodeDecodeError as e:
            return f"{f!r} is not UTF-8 text: {e}"
    return None


def root_cause(error: BaseException) -> str:
    """The innermost exception of a chain, as one line (``datasets`` reports 'An error occurred while generating
    the dataset' around the parser's real message)."""
    while error.__cause__ is not None or error.__context__ is not None:
        error = error.__cause__ or error.__context__
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else 'no detail'}"


def hub_error_message(dataset: str, config: str | None, split: str, cause: BaseException) -> str:
    cfg = f", config {config!r}" if config else ""
    return (
        f"could not download the Hugging Face dataset {dataset!r}{cfg}, split {split!r} "
        f"({type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else 'no detail'}). "
        f"Without network access, get the data on a connected machine, e.g. "
        f"`datasets.load_dataset({dataset!r}{', ' + repr(config) if config else ''}, split={split!r})"
        f".to_parquet('data.parquet')`, copy the file here and run with data.path=/path/to/data.parquet "
        f"(.jsonl, .csv and .parquet in the same columns work), or use the offline synthetic source (data=synthetic)."
    )


def load_table(task, data, cache_dir: str | None = None, path: str | None = None, key: str = "data.path"):
    """The configured rows (or the local files at ``path``, named by config key ``key`` in errors) as one
    flattened ``datasets.Dataset``."""
    import datasets

    datasets.disable_progress_bars()  # a per-file "Generating train split" bar says nothing to a fedmem user
    hf_cache = os.path.join(cache_dir, "hf-datasets") if cache_dir else None
    path = path or data.path
    if path:
        files = local_files(path, key)
        if empty := [f for f in files if os.path.getsize(f) == 0]:  # the parsers fail on them with no word of why
            raise ValueError(f"{key} {path!r}: {empty[0]} is empty (0 bytes)")
        try:
            ds = datasets.load_dataset(_builder(files[0]), data_files=files, split="train", cache_dir=hf_cache)
        except Exception as e:  # datasets wraps the parser's error in a generic one: report the root cause
            where = first_bad_json_line(files) if _builder(files[0]) == "json" else None
            raise ValueError(where or f"{key} {path!r}: cannot be read as {_builder(files[0])}: {root_cause(e)}") from e
        if ds.num_rows == 0:
            raise ValueError(f"{key} {path!r} holds no rows")
    else:
        if data.source != "hf":
            raise ValueError("data.source=local needs data.path")
        if not task.hf_dataset:
            raise ValueError(f"task {task.name!r} names no task.hf_dataset; set data.path to local files")
        try:
            ds = datasets.load_dataset(task.hf_dataset, task.hf_config, split=task.hf_split, cache_dir=hf_cache)
        except Exception as e:  # offline, unknown id, gated ...: one message that says what to do instead
            raise DatasetUnavailableError(hub_error_message(task.hf_dataset, task.hf_config, task.hf_split, e)) from e
    return ds.flatten()
