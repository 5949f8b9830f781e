"""The suite's guard (tests/guard.py) on test sessions of its own: each planted test damages one thing the guard
watches, in a checkout, a home directory and device nodes made for it, and the session fails naming it; a test that
writes only into its own temporary directory and fedmem's cache passes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# the test that replaced the machine's /dev/full (safetensors writes a temp file and renames it over its target)
OLD_FULL_DEVICE_TEST = """
def test_a_write_to_a_full_device_names_the_file():
    import pytest, torch
    from safetensors.torch import save_file
    with pytest.raises(OSError):
        save_file({"w": torch.zeros(4)}, DEVICE)
"""

PLANTED = {
    "device": OLD_FULL_DEVICE_TEST,
    "tracked": """
def test_rewrites_a_tracked_file():
    open("data.txt", "a").write("more")
""",
    "top_level": """
def test_writes_into_the_checkout():
    import os
    os.makedirs("wandb/offline-run", exist_ok=True)
""",
    "home": """
def test_fills_a_cache_in_the_home_directory():
    import os
    from pathlib import Path
    (Path.home() / ".cache" / "somelib").mkdir(parents=True)
    (Path.home() / ".cache" / "somelib" / "index").write_text("x")
""",
    "read_only": """
def test_edits_a_system_text_it_should_only_read():
    from pathlib import Path
    (Path(READ_ONLY) / "GPL").write_text("changed")
""",
    "own": """
def test_writes_only_where_it_may(tmp_path):
    import os
    from pathlib import Path
    (tmp_path / "out").write_text("x")
    Path(os.environ["FEDMEM_CACHE"], "entry").write_text("x")
    Path(os.environ["HF_HOME"], "datasets").mkdir(parents=True)  # a library cache, pointed into the session's own
""",
}


@pytest.fixture
def machine(tmp_path):
    """A checkout (one tracked file), a home with fedmem's cache in it, and, where this runs as root, a /dev/full
    of its own: (checkout, environment for a pytest session there)."""
    checkout, home, dev = tmp_path / "checkout", tmp_path / "home", tmp_path / "dev"
    texts = tmp_path / "licenses"  # a system folder the tests only read, of the guard test's own
    for d in (checkout, home / ".cache" / "fedmem", dev, texts):
        d.mkdir(parents=True)
    (texts / "GPL").write_text("the licence")
    (checkout / "data.txt").write_text("tracked")
    (checkout / "conftest.py").write_text(
        "from tests.guard import own_caches, pytest_sessionfinish, pytest_sessionstart, pytest_terminal_summary\n"
        "own_caches()\n")
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "checkout"], check=True)
    devices = []
    if os.geteuid() == 0:
        os.mknod(dev / "full", stat.S_IFCHR | 0o666, os.makedev(1, 7))
        devices.append(str(dev / "full"))
    env = {k: v for k, v in os.environ.items() if k not in _CACHE_VARS}
    env |= {"HOME": str(home), "FEDMEM_CACHE": str(home / ".cache" / "fedmem"), "PYTHONPATH": str(ROOT),
            "FEDMEM_GUARD_DEVICES": ":".join(devices) or str(dev / "none"), "FEDMEM_GUARD_READ_ONLY": str(texts)}
    return checkout, env


_CACHE_VARS = {"FEDMEM_TESTS_CACHES", "HF_HOME", "MPLCONFIGDIR", "FLWR_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
               "XDG_DATA_HOME", "WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "NLTK_DATA", "TORCH_HOME",
               "HYPOTHESIS_STORAGE_DIRECTORY", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"}


def _session(checkout: Path, env: dict, planted: str, *args: str) -> subprocess.CompletedProcess:
    device = env["FEDMEM_GUARD_DEVICES"].split(":")[0]
    (checkout / "test_planted.py").write_text(f"DEVICE = {device!r}\nREAD_ONLY = {env['FEDMEM_GUARD_READ_ONLY']!r}\n"
                                              + textwrap.dedent(PLANTED[planted]))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args,
                           "test_planted.py"], cwd=checkout, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("planted, line", [
    ("tracked", "tracked file of the checkout changed: data.txt"),
    ("top_level", "the checkout's top level: wandb written"),
    ("home", "written in the home directory: {home}/.cache/somelib/index"),
    ("read_only", "{texts}: a folder the tests only read was written"),
])
def test_the_guard_fails_a_session_that_changed_what_it_must_not(machine, planted, line):
    checkout, env = machine
    done = _session(checkout, env, planted)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "1 passed" in done.stdout  # the planted test itself passed: the guard alone failed the session
    assert "the test session changed what it must not" in done.stdout
    assert line.format(home=env["HOME"], texts=env["FEDMEM_GUARD_READ_ONLY"]) in done.stdout.splitlines(), \
        done.stdout[-3000:]


@pytest.mark.skipif(os.geteuid() != 0, reason="a device node of the test's own needs root to make (mknod)")
def test_the_guard_fails_the_suite_when_the_old_full_device_test_replaces_the_device(machine):
    """The old test, restored against a device node of the guard test's own, in two xdist workers as `make test`
    runs the suite: the device becomes a regular file, the planted test fails (nothing raised), and the session
    fails naming the device, checked by the controlling process."""
    checkout, env = machine
    device = env["FEDMEM_GUARD_DEVICES"]
    done = _session(checkout, env, "device", "-n", "2")
    assert Path(device).is_file()  # what the old test did to /dev/full
    assert done.returncode == 1, done.stdout[-3000:]
    assert f"{device}: was a character device 1,7, now a regular file" in done.stdout.splitlines(), done.stdout[-3000:]


def test_the_guard_passes_a_session_that_wrote_only_its_own_directories(machine):
    checkout, env = machine
    done = _session(checkout, env, "own")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "the test session changed what it must not" not in done.stdout
