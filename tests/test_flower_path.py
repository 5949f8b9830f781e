"""`fedmem run` drives Flower's Simulation Engine in process through `flwr.simulation.run_simulation`, which flwr 1.42
marks deprecated ("will be removed in a future version"). pyproject.toml caps flwr below the first version fedmem
has not been checked with (README, "How fedmem run starts Flower"): a newer flwr installed anyway fails here, before
any run does, saying what to do."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def flwr_requirement() -> Requirement:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return next(r for r in map(Requirement, dependencies) if r.name == "flwr")


def test_flwr_is_capped_below_the_first_version_not_checked():
    caps = [s for s in flwr_requirement().specifier if s.operator == "<"]
    assert len(caps) == 1, "pyproject.toml must cap flwr: `fedmem run` relies on run_simulation"


def test_the_installed_flwr_is_one_fedmem_run_was_checked_with():
    installed = Version(version("flwr"))
    assert installed in flwr_requirement().specifier, (
        f"flwr {installed} is installed, outside pyproject.toml's {flwr_requirement().specifier}: check that "
        f"flwr.simulation.run_simulation still runs server/simulation.py (tests/test_federated.py) and raise the cap, "
        f"or port server/simulation.py to `flwr run` (bench/run_path.py measures it)")
    from flwr.simulation import run_simulation

    assert callable(run_simulation)
