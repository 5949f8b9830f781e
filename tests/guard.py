"""The test suite leaves the machine as it found it: a pytest plugin (loaded by conftest.py) that notes, once for the
whole session, what no test may change, and fails the session when a test changed it.

Checked: the device nodes a test could reach by a stray path (``/dev/full``, ``/dev/null``, ``/dev/zero`` still the
same character devices: as root, a library that writes a temp file and renames it over its target replaces a device
node with a regular file), the folders of the files the tests only read (the licence texts installed with
fedmem's dependencies, the benches' English text), the checkout's tracked files and its top level (nothing written
into the checkout), and the user's home (every library cache a test run would fill, Hugging Face's, matplotlib's,
Flower's, is pointed into the session's own directory by :func:`own_caches`).

Under pytest-xdist the check runs in the controlling process only, before the workers start and after they end.
``FEDMEM_GUARD_DEVICES``, ``FEDMEM_GUARD_READ_ONLY`` (paths joined by ``:``) and ``HOME`` say what is checked; the
guard's own test points them at nodes, a folder and a home of its own making.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

DEVICES = "/dev/full:/dev/null:/dev/zero"
_OWN = "FEDMEM_TESTS_CACHES"  # the session's own directory of library caches (own_caches)
# written by Python and pytest themselves (byte code; pytest's cache, at the session's end, after this check)
NOT_WATCHED = {".pytest_cache", "__pycache__"}


def own_caches() -> Path:
    """Point the caches that libraries keep under the home directory into one new directory of this session:
    datasets' and the hub's, matplotlib's font list, Flower's home, every XDG cache and config. Returns that
    directory, made once in the controlling process (its workers inherit it) and removed at the session's end.
    Variables the user set already are kept."""
    if os.environ.get(_OWN):
        return Path(os.environ[_OWN])
    root = Path(tempfile.mkdtemp(prefix="fedmem-tests-home-"))
    os.environ[_OWN] = str(root)
    for var, sub in {"HF_HOME": "huggingface", "MPLCONFIGDIR": "matplotlib", "FLWR_HOME": "flwr",
                     "XDG_CACHE_HOME": "cache", "XDG_CONFIG_HOME": "config", "XDG_DATA_HOME": "data",
                     "WANDB_DIR": "wandb", "WANDB_CONFIG_DIR": "wandb-config", "WANDB_CACHE_DIR": "wandb-cache",
                     "NLTK_DATA": "nltk", "TORCH_HOME": "torch", "HYPOTHESIS_STORAGE_DIRECTORY": "hypothesis"}.items():
        os.environ.setdefault(var, str(root / sub))
    return root


def _device(path: str) -> str:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "missing"
    kind = "character device" if stat.S_ISCHR(st.st_mode) else "block device" if stat.S_ISBLK(st.st_mode) \
        else "regular file" if stat.S_ISREG(st.st_mode) else "other"
    return f"{kind} {os.major(st.st_rdev)},{os.minor(st.st_rdev)}" if kind.endswith("device") else kind


def _written_since(root: Path, since: Path, skip: set[Path]) -> list[str]:
    """The files and directories under ``root`` created, written or replaced (their status changed) after ``since``
    was, the directories in ``skip`` left out. One walk by find(1): a home directory holds toolchains of hundreds of
    thousands of files."""
    prune = [a for d in sorted(skip) for a in ("-path", str(d), "-prune", "-o")]
    found = subprocess.run(["find", str(root), *prune, "-cnewer", str(since), "-print"], capture_output=True,
                           text=True).stdout.splitlines()
    return sorted(set(found) - {str(since)})


def _tracked(checkout: Path) -> dict[str, tuple]:
    """(size, mtime, inode) of the checkout's tracked files, and the names at its top level."""
    names = subprocess.run(["git", "-C", str(checkout), "ls-files", "-z"], capture_output=True, text=True,
                           check=True).stdout.split("\0")
    found = {}
    for name in filter(None, names):
        try:
            st = (checkout / name).lstat()
            found[name] = (st.st_size, st.st_mtime_ns, st.st_ino)
        except FileNotFoundError:
            found[name] = None
    found["(top level)"] = tuple(sorted(set(os.listdir(checkout)) - NOT_WATCHED))
    return found


def _listing(folder: str) -> dict[str, tuple]:
    """Every file under ``folder`` with its size and modification time (empty where the folder is missing)."""
    root = Path(folder)
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()} if root.is_dir() else {}


def read_only_folders() -> str:
    """The folders of the files the tests and benches read English text from (bench/references.py: the licence
    texts fedmem's dependencies install), joined by ``:``: read, never written."""
    from bench.references import english_files

    return ":".join(sorted({str(f.parent) for f in english_files()}))


def machine_state(checkout: Path) -> dict:
    devices = os.environ.get("FEDMEM_GUARD_DEVICES", DEVICES).split(":")
    read_only = [f for f in os.environ.get("FEDMEM_GUARD_READ_ONLY", read_only_folders()).split(":") if f]
    return {"devices": {d: _device(d) for d in devices},
            "read_only": {f: _listing(f) for f in read_only},
            "checkout": _tracked(checkout) if (checkout / ".git").exists() else {}}


def changes(before: dict, after: dict, home_written: list[str]) -> list[str]:
    """One line per thing the session changed that it must not have."""
    lines = [f"{d}: was a {before['devices'][d]}, now a {after['devices'][d]}"
             for d in before["devices"] if before["devices"][d] != after["devices"][d]]
    lines += [f"{f}: a folder the tests only read was written"
              for f in before.get("read_only", {}) if before["read_only"][f] != after.get("read_only", {}).get(f)]
    was, now = before["checkout"], after["checkout"]
    for path in sorted(set(was) | set(now)):
        if was.get(path) == now.get(path):
            continue
        if path == "(top level)":
            added, gone = set(now[path]) - set(was[path]), set(was[path]) - set(now[path])
            lines += [f"the checkout's top level: {', '.join(sorted(names))} {verb}"
                      for names, verb in ((added, "written"), (gone, "removed")) if names]
        else:
            lines.append(f"tracked file of the checkout {'removed' if now.get(path) is None else 'changed'}: {path}")
    return lines + [f"written in the home directory: {path}" for path in home_written]


def _home_skipped(checkout: Path) -> set[Path]:
    """fedmem's own cache (the one the tests are given, and its default place) and the checkout."""
    home = Path.home()
    return {Path(os.environ[v]) for v in ("FEDMEM_CACHE",) if os.environ.get(v)} | {home / ".cache" / "fedmem",
                                                                                    checkout}


def _controller(config) -> bool:
    return not hasattr(config, "workerinput")  # an xdist worker has it; the controller and a plain run do not


def pytest_sessionstart(session):
    if _controller(session.config):
        since = Path(own_caches()) / ".session-start"  # a file written now: what changes after it was written by a test
        since.touch()
        session.config.stash[_BEFORE] = (machine_state(session.config.rootpath), since)


def pytest_sessionfinish(session, exitstatus):
    if not _controller(session.config) or _BEFORE not in session.config.stash:
        return
    before, since = session.config.stash[_BEFORE]
    root = session.config.rootpath
    found = changes(before, machine_state(root), _written_since(Path.home(), since, _home_skipped(root)))
    if os.environ.get(_OWN):
        shutil.rmtree(os.environ[_OWN], ignore_errors=True)
    if found:
        shown = found[:20] + ([f"... and {len(found) - 20} more"] if len(found) > 20 else [])
        session.config.stash[_FOUND] = shown
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if found := config.stash.get(_FOUND, None):
        terminalreporter.section("the test session changed what it must not", sep="=", red=True)
        for line in found:
            terminalreporter.line(line, red=True)


_BEFORE = pytest.StashKey[tuple]()
_FOUND = pytest.StashKey[list]()
