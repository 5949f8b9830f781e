"""One writer per directory (a run's, an audit's): ``<dir>/.fedmem.lock`` holds the writer's process id under an
exclusive ``flock``, taken before the writer writes anything there and released when it is done.

The lock is the flock, not the file: the kernel releases it when its process ends, however it ends (SIGKILL
included), so a lock left behind by a process that has gone is told from a live one without trusting a process id
that may since have been reused; the id in the file only names the holder. (The filelock package's FileLock keeps no
holder's id to name.)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from pathlib import Path
from typing import Iterator

from fedmem.common.io import FileProblem, writing

LOCK_FILE = ".fedmem.lock"


class InUse(FileProblem):
    """Another live process holds the directory's lock."""


# The locks this process holds (path -> descriptor): an exit that skips the blocks' endings (a second Ctrl-C) still
# removes their files (release_held), so that the next command finds the directory free, not left by a dead process.
_held: dict[Path, int] = {}


@contextlib.contextmanager
def exclusive(directory) -> Iterator[None]:
    """Hold ``directory``'s lock while the block runs. The directory is created if needed, and removed when it is
    released if nothing else was written into it (a command refused leaves no directory behind). Another live
    holder: InUse, naming its process id. A lock file whose holder has gone is taken over with a line on stderr
    saying so."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    try:
        fd = _acquire(path)
    except BaseException:
        _remove_if_empty(directory)
        raise
    _held[path] = fd
    try:
        yield
    finally:
        _release(path)
        _remove_if_empty(directory)


def _release(path: Path) -> None:
    fd = _held.pop(path, None)
    if fd is None:
        return
    # unlinked before it is unlocked: a process that opened it meanwhile finds it unlinked once it holds it
    path.unlink(missing_ok=True)
    os.close(fd)


def release_held() -> None:
    """Release every lock this process holds, for an exit that runs no ``finally`` (the kernel would release the
    flocks, but their files would stay and the next command would report a dead holder)."""
    for path in list(_held):
        with contextlib.suppress(OSError):
            _release(path)


def _acquire(path: Path) -> int:
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise InUse(f"{path.parent} is in use by process {holder or '(unknown)'} (its lock: {path}); wait for it "
                        f"to end, or stop it") from None
        if os.fstat(fd).st_nlink:  # not unlinked by a holder that released it after we opened it
            break
        os.close(fd)
    try:
        left = _holder(fd)
        if left:
            print(f"fedmem: {path.parent} was left locked by process {left}, which is no longer running; taking it "
                  f"over", file=sys.stderr, flush=True)
        with writing(path):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except BaseException:
        path.unlink(missing_ok=True)
        os.close(fd)
        raise
    return fd


def _holder(fd: int) -> str:
    """The process id written in an open lock file ("" if none yet)."""
    return os.pread(fd, 64, 0).decode(errors="replace").strip()


def _remove_if_empty(directory: Path) -> None:
    with contextlib.suppress(OSError):
        directory.rmdir()
