"""Writing what a source produced: the ground truth (atomic JSON) and, in a cache directory, the records."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from fedmem.common.io import atomic_write_text

GROUND_TRUTH_FILE = "ground_truth.json"


def _target(path) -> Path:
    path = Path(path)
    return path / GROUND_TRUTH_FILE if path.is_dir() or not path.suffix else path


def write_ground_truth(fd, path) -> Path:
    """Write ``fd.ground_truth`` as JSON, atomically. ``path``: a file, or a directory (-> ground_truth.json)."""
    return atomic_write_text(_target(path), json.dumps(fd.ground_truth, indent=2, sort_keys=True))


def read_ground_truth(path) -> dict:
    """Read what :func:`write_ground_truth` wrote (a file, or a directory holding ground_truth.json)."""
    return json.loads(_target(path).read_text(encoding="utf-8"))


def data_key(task, data, seed: int) -> str:
    """A short hash of everything that decides the generated or loaded data."""
    blob = json.dumps({"task": dataclasses.asdict(task), "data": dataclasses.asdict(data), "seed": seed},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def save_federated(fd, directory) -> Path:
    """``records.jsonl`` (one record per line, with client and split), ``public_corpus.jsonl`` and
    ``ground_truth.json`` in ``directory``; each file atomic, ground truth last (it marks a complete save)."""
    directory = Path(directory)
    lines = []
    for c, split, r in fd.all_records():
        lines.append(json.dumps({"client": c, "split": split, **dataclasses.asdict(r)}, sort_keys=True))
    atomic_write_text(directory / "records.jsonl", "\n".join(lines) + "\n")
    atomic_write_text(directory / "public_corpus.jsonl",
                      "".join(json.dumps({"text": t}) + "\n" for t in fd.public_corpus))
    write_ground_truth(fd, directory / GROUND_TRUTH_FILE)
    return directory
