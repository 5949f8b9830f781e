"""One builder per cache entry. Processes that share a cache directory (a sweep's parallel jobs, runs started side by
side, the test suite's workers) would otherwise each pretrain the same tiny base or convert the same GGUF file; under
this lock the first builds the entry and the others wait for it, then find it complete."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def building(target) -> Iterator[None]:
    """Hold the build lock of the cache entry ``target`` (a sibling ``.<name>.lock`` file; blocking). Check whether
    the entry is complete inside the block, not before it."""
    from filelock import FileLock

    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(target.parent / f".{target.name}.lock"):
        yield
