"""Atomic file output: every file fedmem writes goes through here, so an interrupted run never leaves a
half-written report, record file, figure, adapter or cache entry behind (a temp name in the same directory, then
``os.replace``). A write that fails for the disk's sake (full, or not writable) is an OSError naming the file it was
writing, whichever library wrote it, and :func:`write_fault` says it in words."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import gzip
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np


class FileProblem(ValueError):
    """A file or directory fedmem cannot use as it is (a damaged file of a run, a directory another process writes):
    refused like a bad setting, and its message is the whole line, naming the path and what to do."""


# The errors of a write that the disk refused rather than fedmem: full (or over quota), not writable, read-only.
WRITE_FAULTS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS}
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")  # how safetensors (Rust) reports the OS error behind a failed write


def os_error_code(e: BaseException) -> int | None:
    """The OS error number behind ``e`` or the exceptions it came from: an OSError's own, or the one a library
    names in its message (safetensors: "I/O error: No space left on device (os error 28)")."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno:
            return e.errno
        if (match := _RUST_OS_ERROR.search(str(e))) is not None:
            return int(match.group(1))
        e = e.__cause__ or e.__context__
    return None


@contextlib.contextmanager
def writing(path) -> Iterator[None]:
    """A write into ``path`` that the disk refused becomes ``OSError(errno, strerror, path)``: the file named (a
    library's own error may name a temp file, or nothing), the same type whichever library wrote."""
    try:
        yield
    except Exception as e:
        code = os_error_code(e)
        if code in WRITE_FAULTS and getattr(e, "filename", None) != str(path):
            raise OSError(code, os.strerror(code), str(path)) from e
        raise


def write_fault(e: BaseException) -> str | None:
    """One line for a write the disk refused (``WRITE_FAULTS``), naming the file and, for a full disk, the free
    space on its file system; None for any other error."""
    code = os_error_code(e)
    if code not in WRITE_FAULTS:
        return None
    path = getattr(e, "filename", None)
    line = os.strerror(code).lower() + (f" writing {path}" if path else "")
    return line + _free_space(path) if code in (errno.ENOSPC, errno.EDQUOT) else line


def _free_space(path) -> str:
    """`` (the disk at <mount point>: <free> of <total> MB free)`` for the file system holding ``path``."""
    if not path:
        return ""
    mount = Path(path).absolute()
    while not os.path.ismount(mount):
        mount = mount.parent
    usage = shutil.disk_usage(mount)
    return f" (the disk at {mount}: {usage.free / 1e6:.1f} of {usage.total / 1e6:.1f} MB free)"


@contextlib.contextmanager
def atomic_path(path, suffix: str = "") -> Iterator[Path]:
    """Yield a temp file path beside ``path``; on success it replaces ``path``, on error it is removed.

    ``suffix`` keeps the extension for writers that infer the format from the name (matplotlib)."""
    path = Path(path)
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
        os.close(fd)
        try:
            yield Path(tmp)
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)


def atomic_write_text(path, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def atomic_write_json(path, obj: Any, indent: int | None = 2) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=indent))


def atomic_write_jsonl_gz(path, rows) -> Path:
    """One JSON object per line, gzip-compressed."""
    with atomic_path(path) as tmp, gzip.open(tmp, "wt", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return Path(path)


@contextlib.contextmanager
def atomic_dir(target) -> Iterator[Path]:
    """Yield a temp directory beside ``target``; on success it takes ``target``'s place (an existing one is moved
    aside first and removed after), on error it is removed. A crash at any point leaves either the old or the
    new directory complete under ``target`` (or the old one under its aside name)."""
    target = Path(target)
    with writing(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
        try:
            yield tmp
            if target.exists():
                aside = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-old-"))
                os.replace(target, aside / target.name)
                os.replace(tmp, target)
                shutil.rmtree(aside, ignore_errors=True)
            else:
                os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def save_figure(fig, path, dpi: int = 100) -> str:
    """Save a matplotlib figure atomically, close it, and return its file name (for links in the report)."""
    import matplotlib.pyplot as plt

    path = Path(path)
    try:
        if fig.get_layout_engine() is None:  # figures laid out by matplotlib's constrained engine keep theirs
            fig.tight_layout()
        with atomic_path(path, suffix=path.suffix) as tmp:
            fig.savefig(tmp, dpi=dpi)
    finally:
        plt.close(fig)
    return path.name


def pyplot():
    """matplotlib's pyplot on the non-interactive Agg backend (reports are written by servers and CI)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def to_jsonable(obj: Any) -> Any:
    """numpy scalars and arrays, tuples and dataclasses to plain JSON types; NaN and infinities to null."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return None
    return obj
