"""Audits without training: the saved rounds of a run under other audit settings, or a model fedmem did not train.

    fedmem audit run=<run dir> [rounds=0,3 | rounds=last] [name=<name>]
                 [audit.* overrides, audit/<group>=<preset>, experiment=...]
    fedmem audit -m run=<run dir> audit.prefix_len=10,30,50,100 audit/decoding=top_k,top_p,temperature
    fedmem audit model.path=<HF model dir> [model.adapter=<peft adapter dir>] task=... data=local data.path=...
    fedmem audit model.gguf_file=<file.gguf> [model.adapter=<peft adapter dir>] task=... data=local data.path=...

A re-audit reads the run's own resolved ``config.yaml``, changes ``audit.*`` only (anything that shaped training is
refused, naming the key), loads each saved ``round_<r>/adapter`` and writes the same reports as a training run
under ``<run>/audits/<name>/``; the run's own reports are never touched. An external model is audited once, as
round 0, with the papers' audit rules (``experiment=paper``) unless told otherwise; its reports name the model and
adapter it audited, with hashes of their files. Every check happens before any output directory exists (a saved
round's damaged file included), and one process at a time writes an output directory (``fedmem.common.lock``).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Callable, Iterator

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser

from fedmem.audit import AUDIT_METHODS
from fedmem.common.io import FileProblem, atomic_write_json
from fedmem.common.lock import exclusive
from fedmem.config import (
    ExperimentConfig,
    compose_dict,
    compose_over,
    from_dict,
    write_config,
)
from fedmem.engine.model.gguf import gguf_identity
from fedmem.engine.model.load import (
    check_local_model,
    load_audited_model,
    load_tokenizer,
)
from fedmem.experiment.archive import (
    RunArchive,
    check_kept_updates,
    check_no_updates_needed,
    damaged_adapter,
    damaged_report,
    saved_adapter,
)
from fedmem.experiment.auditor import Auditor, make_auditor
from fedmem.experiment.lifecycle import set_status
from fedmem.experiment.loading import AuditPlan, audit_plan, audited_config, checked_plan, federated_data
from fedmem.federation.strategies import CENTRALIZED
from fedmem.reports.sweep import write_sweep_report


def split_args(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """(``run`` / ``rounds`` / ``name`` values, the config overrides), in order."""
    special, overrides = {}, []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not eq:
            raise ValueError(f"fedmem audit: expected key=value, got {arg!r}")
        if key in ("run", "rounds", "name"):
            special[key] = value
        else:
            overrides.append(arg)
    return special, overrides


def audit_name(overrides: list[str]) -> str:
    """A directory name from the overrides (``prefix_len=10,decoding=top_p``); ``rerun`` without any."""
    parts = [o.removeprefix("audit.").removeprefix("audit/").replace("/", "-") for o in overrides]
    return re.sub(r"[^A-Za-z0-9_.=,+-]", "_", ",".join(parts))[:120] or "rerun"


def saved_rounds(run: Path) -> list[int]:
    adapters = run.glob("round_*/adapter/adapter_config.json")
    return sorted(int(p.parent.parent.name.removeprefix("round_")) for p in adapters)


def _rounds(run: Path, spec: str | None) -> list[int]:
    saved = saved_rounds(run)
    if not saved:
        raise ValueError(f"run={run}: no saved round_<r>/adapter to audit")
    if not spec:
        return _undamaged(run, saved, saved)
    if spec == "last":  # the run's last saved round, whatever its number (a study's sweeps over its final model)
        return _undamaged(run, saved[-1:], saved)
    try:
        wanted = [int(r) for r in spec.strip("[]").split(",") if r.strip()]
    except ValueError:
        raise ValueError(f"rounds={spec}: expected round numbers, e.g. rounds=0,3") from None
    missing = [r for r in wanted if r not in saved]
    if missing:
        raise ValueError(f"rounds={spec}: round(s) {missing} have no saved adapter in {run}; saved: {saved}")
    return _undamaged(run, wanted, saved)


def _undamaged(run: Path, rounds: list[int], saved: list[int]) -> list[int]:
    """``rounds``, once every file the audit reads is whole (every saved round's report, for the rounds' train logs
    and DP's budget; the audited rounds' adapters); otherwise a FileProblem naming the file and what to do."""
    for r in saved:
        if problem := damaged_report(run, r):
            raise FileProblem(f"run={run}: {problem}; restore it from a copy of the run, or train the run again")
    for r in rounds:
        if problem := damaged_adapter(run, r):
            others = ",".join(str(x) for x in saved if x != r)
            instead = f"audit the other rounds (rounds={others}) or " if others else ""
            raise FileProblem(f"run={run}: {problem}; {instead}train the run again to write round {r} anew")
    return rounds


def prepare_reaudit(run_dir: str, overrides: list[str], rounds: str | None, out: Path | None = None
                    ) -> tuple[ExperimentConfig, list[int], Path]:
    """Validate everything about a re-audit, the data's sample pool included, and return (its config, the rounds,
    the training run). Nothing is written."""
    run = Path(run_dir)
    if not (run / "config.yaml").is_file():
        raise ValueError(f"run={run_dir}: not a fedmem run directory (no config.yaml)")
    d = compose_over(yaml.safe_load((run / "config.yaml").read_text()), overrides)
    d["run_dir"] = str(out or unused(run / "audits" / audit_name(overrides)))
    cfg = from_dict(d)
    rounds_ = _rounds(run, rounds)
    check_kept_updates(cfg, run, rounds_)
    # a pool the data cannot fill fails here; the config holds the sizes audit.size=auto chose, as the audit
    # records them
    cfg = audited_config(cfg, audit_plan(cfg))
    return cfg, rounds_, run


def unused(directory: Path) -> Path:
    """``directory``, or where it already holds an audit, the first of ``<directory>-2``, ``-3``, ... that does not,
    said in one line: an audit named after its overrides is never written over an earlier one."""
    taken = lambda d: (d / "audit.json").exists() or any(d.glob("round_*"))  # noqa: E731
    if not taken(directory):
        return directory
    n = 2
    while taken(numbered := directory.with_name(f"{directory.name}-{n}")):
        n += 1
    print(f"fedmem: {directory} holds an earlier audit; this one goes to {numbered}", file=sys.stderr, flush=True)
    return numbered


def refuse_written(directory: Path, name: str) -> None:
    """An audit given ``name=`` whose directory already holds an audit is refused in one line (unless another process
    is writing it now: its lock then says so)."""
    if ((directory / "audit.json").exists() or any(directory.glob("round_*"))) and \
            not (directory / ".fedmem.lock").exists():
        raise FileProblem(f"name={name}: {directory} already holds an audit; choose another name, or remove it to "
                          "audit into it again")


@contextlib.contextmanager
def audit_status(out: Path) -> Iterator[None]:
    """``status.json`` of an audit directory: running while the block runs, then finished, stopped (Ctrl-C or
    SIGTERM) or failed with the error; the lock is released either way (``exclusive``)."""
    set_status(out, "running")
    try:
        yield
    except KeyboardInterrupt:
        set_status(out, "stopped")
        raise
    except BaseException as e:
        set_status(out, "failed", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
        raise
    set_status(out, "finished")


def reaudit(cfg: ExperimentConfig, rounds: list[int], run: Path, overrides: list[str]) -> Path:
    """Audit the saved adapters of ``run`` (prepared by :func:`prepare_reaudit`); returns the output directory."""
    source = {"kind": "reaudit", "run": str(run), "overrides": list(overrides), "rounds": rounds}
    label = "cl" if cfg.strategy.name == CENTRALIZED else "fl"
    auditor = make_auditor(cfg, label, source=source, save_adapters=False, archive=RunArchive(run))
    out = Path(cfg.run_dir)
    with exclusive(out), audit_status(out):
        write_config(cfg, out / "config.yaml")
        atomic_write_json(out / "audit.json", source)
        saved = {int(p.parent.name.removeprefix("round_")): json.loads(p.read_text())
                 for p in run.glob("round_*/report.json")}
        auditor.know_rounds(list(saved.values()))  # every round's participation, for DP's budget
        for r in rounds:
            state = saved_adapter(run, r)
            report = saved.get(r, {})
            dp = (report.get("defense") or {}).get("dp") or {}
            auditor.evaluate(r, state, report.get("train", {}), report.get("participation"), dp.get("clipping_norm"))
        auditor.finish()
    return out


def expand_sweep(overrides: list[str]) -> list[list[str]]:
    """Every combination of a sweep's values, read with Hydra's own override grammar (``a=1,2``, ``range(1,4)``,
    ``choice(...)``; a list ``[a,b]`` or a quoted ``"a,b"`` is one value), as a training sweep reads them."""
    choices = []
    for override in OverridesParser.create().parse_overrides(overrides):
        if override.is_sweep_override():
            key = override.get_key_element()
            choices.append([f"{key}={v}" for v in override.sweep_string_iterator()])
        else:
            choices.append([override.input_line])
    return [list(combo) for combo in itertools.product(*choices)]


def prepare_reaudit_sweep(run_dir: str, overrides: list[str], rounds: str | None, name: str | None):
    """One re-audit per combination, as jobs ``<run>/audits/<name>/<i>/``, then the sweep tables. Every job is
    validated here, before the first one runs; returns the function that runs them."""
    run = Path(run_dir)
    sweep = run / "audits" / (name or time.strftime("sweep-%Y%m%d-%H%M%S"))
    jobs = [prepare_reaudit(run_dir, combo, rounds, out=sweep / str(i)) + (combo,)
            for i, combo in enumerate(expand_sweep(overrides))]  # every job checked before the first one runs

    def run_jobs() -> Path:
        with exclusive(sweep):
            atomic_write_json(sweep / "sweep.json", {"audit_only": True, "run": str(run), "overrides": overrides})
            for cfg, rs, _, combo in jobs:
                print(reaudit(cfg, rs, run, combo), flush=True)
            return write_sweep_report(sweep)

    return run_jobs


def _files_sha256(directory: str) -> str:
    """One hash over every file below ``directory`` (relative names and contents, in sorted order)."""
    h = hashlib.sha256()
    root = Path(directory)
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def prepare_external(overrides: list[str], name: str | None) -> tuple[ExperimentConfig, AuditPlan]:
    """(the config, the audit plan) of an external model's audit, everything validated (config, model and adapter
    directories, the data's sample pool with the model's tokenizer); nothing is written."""
    preset = [] if any(o.startswith("experiment=") for o in overrides) else ["experiment=paper"]
    d = compose_dict([*preset, *overrides])  # the papers' audit rules unless another preset is named
    path = (d.get("model") or {}).get("path")
    gguf = (d.get("model") or {}).get("gguf_file")
    if d["model"]["name"] == "tiny" and (path or gguf):  # no model preset named: call the model by its file
        d["model"]["name"] = Path(path).name if path else Path(gguf).stem
    d["run_dir"] = str(Path("runs") / (name or time.strftime(f"audit-%Y%m%d-%H%M%S-{d['task']['name']}")))
    cfg = from_dict(d)
    check_local_model(cfg.model)
    check_membership(cfg)
    check_no_updates_needed(cfg)
    plan = checked_plan(cfg, federated_data(cfg), load_tokenizer(cfg.model, cfg.cache_dir))
    return audited_config(cfg, plan), plan


def check_membership(cfg: ExperimentConfig) -> None:
    """fedmem did not train this model, so its own split says nothing about which rows the model saw: a method
    that compares members with non-members needs the data to say it (``data.membership_column``)."""
    comparing = [m for m in cfg.audit.methods if AUDIT_METHODS[m].compares_members]
    if comparing and not cfg.data.marks_membership:
        raise ValueError(f"audit.methods {comparing} compare the rows a model was trained on with rows it was not, and "
                         f"fedmem did not train this model: name the data's column that says so per row "
                         f"(data.membership_column, values train / test / public), or leave those methods out")


def audit_external(cfg: ExperimentConfig, plan: AuditPlan) -> Path:
    """Audit ``model.path`` or ``model.gguf_file`` (+ ``model.adapter``) on the configured clients' data, once, as
    round 0, over the plan :func:`prepare_external` built."""
    if cfg.model.gguf_file:
        ident = gguf_identity(cfg.model)
        model_name, model_sha256 = ident["gguf_file"], ident["gguf_sha256"]
    else:
        model_name, model_sha256 = cfg.model.path, _files_sha256(cfg.model.path)
    source = {"kind": "external", "model": model_name, "model_sha256": model_sha256, "adapter": cfg.model.adapter,
              "adapter_sha256": _files_sha256(cfg.model.adapter) if cfg.model.adapter else None}
    data = federated_data(cfg)
    source["membership"] = data.ground_truth.get("membership") or {"source": "split", "seed": cfg.seed}
    model, tokenizer = load_audited_model(cfg.model, cfg.cache_dir)
    auditor = Auditor(cfg, model, tokenizer, plan, label="fl", source=source, save_adapters=False)
    out = Path(cfg.run_dir)
    with exclusive(out), audit_status(out):
        write_config(cfg, out / "config.yaml")
        atomic_write_json(out / "audit.json", source)
        auditor.evaluate(0, None)
        auditor.finish()
    return out


def prepare_audit(argv: list[str]) -> Callable[[], Path]:
    """``fedmem audit`` (see the module docstring): validate everything, then return the function that runs the
    audit and returns its output directory. Bad input raises ValueError here, before anything is written."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    multirun = bool(argv) and argv[0] in ("-m", "--multirun")
    try:
        special, overrides = split_args(argv[1:] if multirun else argv)
        if "run" in special:
            if multirun:
                return prepare_reaudit_sweep(special["run"], overrides, special.get("rounds"), special.get("name"))
            out = Path(special["run"]) / "audits" / special["name"] if special.get("name") else None
            if out is not None:
                refuse_written(out, special["name"])
            cfg, rounds, run = prepare_reaudit(special["run"], overrides, special.get("rounds"), out)
            return lambda: reaudit(cfg, rounds, run, overrides)
        if multirun or "rounds" in special:
            raise ValueError("fedmem audit: -m and rounds= need run=<run dir> (a training run's saved rounds)")
        cfg, plan = prepare_external(overrides, special.get("name"))
        return lambda: audit_external(cfg, plan)
    except (HydraException, OmegaConfBaseException) as e:
        raise ValueError(str(e).strip().splitlines()[0]) from None
