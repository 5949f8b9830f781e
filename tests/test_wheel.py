"""A wheel built from the repository works anywhere: installed (not editable) into a fresh environment, it runs
`fedmem resolve` and a one-round tiny experiment from an empty directory, with no checkout on its path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from tests.conftest import FAST

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd, cwd, env, timeout=600):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd[:3]} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.mark.slow
def test_wheel_runs_outside_the_checkout(tmp_path, cache_dir):
    # built from a copy of the sources: setuptools builds in the source tree and would leave build/ behind
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "runs", ".cache", "build", "*.egg-info", "__pycache__", ".pytest_cache", "outputs", "multirun"))
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", dist, src],
         cwd=tmp_path, env=os.environ)
    wheel = next(dist.glob("fedmem-*.whl"))

    # A fresh environment whose only view of this one is its installed dependencies (a .pth line adds the
    # directory without running its .pth files, so the checkout's editable install stays invisible).
    env_dir = tmp_path / "env"
    _run([sys.executable, "-m", "venv", "--without-pip", env_dir], cwd=tmp_path, env=os.environ)
    py = env_dir / "bin" / "python"
    site = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path,
                     os.environ).strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FEDMEM_CONF")}
    _run([py, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", wheel], cwd=tmp_path, env=env)

    work = tmp_path / "empty"
    work.mkdir()
    where = _run([py, "-c", "import fedmem, clients, server; print(fedmem.__file__, clients.__file__)"], work, env)
    assert str(ROOT) not in where and str(env_dir) in where

    fedmem = env_dir / "bin" / "fedmem"
    resolved = Path(_run([fedmem, "resolve", "strategy.num_rounds=2"], work, env).strip().splitlines()[-1])
    cfg = yaml.safe_load(resolved.read_text())
    assert resolved.is_relative_to(work) and cfg["strategy"]["num_rounds"] == 2
    assert cfg["experiment"] == "offline_demo" and cfg["model"]["name"] == "tiny"

    out = _run([fedmem, "run", *FAST, f"cache_dir={cache_dir}", "hydra.run.dir=runs/wheel"], work, env)
    run_dir = work / "runs" / "wheel"
    assert out.strip().splitlines()[-1].endswith("runs/wheel")
    assert (run_dir / "round_1" / "report.json").exists() and (run_dir / "summary.json").exists()


def test_every_package_of_the_source_tree_goes_into_the_wheel():
    """setuptools takes the packages pyproject.toml's find rule matches: a package folder the rule misses would be
    missing from an installed fedmem (a one-round run does not import every one of them)."""
    import tomllib

    from setuptools import find_namespace_packages

    rule = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    taken = set(find_namespace_packages(where=str(ROOT), include=rule["include"]))
    found = {".".join(p.parent.relative_to(ROOT).parts) for top in ("fedmem", "clients", "server")
             for p in (ROOT / top).rglob("__init__.py")}
    assert found <= taken, sorted(found - taken)
    assert "fedmem.conf" in taken and "fedmem.conf.experiment" in taken  # the configs travel in the wheel
