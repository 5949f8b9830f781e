"""What a run keeps of its rounds on disk besides their reports, and what the audits may read of it (SPEC §11).

- ``round_<r>/adapter/``: the global adapter of every round, always (the trajectory attack scores every earlier
  round's global model through it; a re-audit loads it).
- ``round_<r>/updates/client_<k>.safetensors``: each client's update of round r as the server received it (the
  adapter the client sent: the round's starting global adapter plus its local training). Written by the server
  only while a method that scores them is enabled (``AuditMethod.scores_updates``: source inference) or
  ``audit.keep_updates`` asks for them, and removed as soon as their round is audited unless ``audit.keep_updates``
  keeps them for re-audits. A centralized run has no clients and writes none.
- ``round_<r>/canary_projections.json``: in a run with canary clients, the change of the round's canary release
  (its aggregate with the canary clients averaged in, ``fedmem.federation.canary_clients``) along each direction the
  client-level audit reads, with the release's noise and a canary's norm: what that audit needs, a few numbers per
  direction. The release itself, a second noisy copy of the real clients' sum, stays in memory; only
  ``audit.canary_clients.keep_release`` writes it (``round_<r>/canary_release/``), and the budget then counts it.

:class:`RunArchive` is the audit core's ``RoundArchive`` over one run directory: a training run's own, which
writes and removes the updates, or a re-audited run's, which it only reads.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from safetensors import SafetensorError, safe_open

from fedmem.audit import AUDIT_METHODS
from fedmem.common.io import atomic_path, atomic_write_json
from fedmem.config.experiment import ExperimentConfig, method_configs
from fedmem.federation.strategies import CENTRALIZED


UPDATES = "updates"  # round_<r>/updates/: each client's update of the round
CANARY_RELEASE = "canary_release"  # round_<r>/canary_release/: the round's release with its canary clients, if kept
CANARY_PROJECTIONS = "canary_projections.json"  # round_<r>/: the canary release's change along the audit's directions


def load_file(path: str) -> dict:
    """A safetensors file's tensors (torch, loaded when a run's files are first read)."""
    from safetensors.torch import load_file as load

    return load(path)


def save_file(state: dict, path: str) -> None:
    from safetensors.torch import save_file as save

    save(state, path)


def adapter_file(run_dir, server_round: int) -> Path:
    return Path(run_dir) / f"round_{server_round}" / "adapter" / "adapter_model.safetensors"


def saved_adapter(run_dir, server_round: int) -> dict:
    """The global adapter written after ``server_round`` (``round_<r>/adapter``)."""
    return load_file(str(adapter_file(run_dir, server_round)))


# A saved round's files are checked before a resume or a re-audit reads them, so that a file cut short (a copy
# interrupted, a disk error) is named rather than failing inside the library that reads it.

def damaged_report(run_dir, server_round: int) -> str | None:
    """What is wrong with a saved round's ``report.json`` (when it has one), or None."""
    report = Path(run_dir) / f"round_{server_round}" / "report.json"
    try:
        if report.is_file():
            json.loads(report.read_text())
    except ValueError as e:  # a JSON or UTF-8 decoding error
        return f"{report} is damaged ({e})"
    return None


def damaged_adapter(run_dir, server_round: int) -> str | None:
    """What is wrong with a saved round's adapter, or None. Opening a safetensors file reads its header and checks
    that its tensors cover the file exactly, without loading them."""
    path = adapter_file(run_dir, server_round)
    try:
        with safe_open(str(path), framework="pt"):
            return None
    except SafetensorError as e:
        return f"{path} is damaged ({e})"
    except OSError as e:
        return f"{path} cannot be read ({e.strerror})"


def scoring_updates(cfg: ExperimentConfig) -> list[str]:
    """The enabled audit methods that score each client's update of a round."""
    return [name for name in method_configs(cfg) if AUDIT_METHODS[name].scores_updates]


class RunArchive:
    """One run directory's rounds. ``writes``: the run being trained, whose server writes its clients' updates
    (:meth:`save_updates`) and whose auditor lets each round's go once audited (:meth:`audited`) unless ``keep``."""

    def __init__(self, run_dir, writes: bool = False, keep: bool = True, seed: int = 0, directions: int = 0,
                 keep_release: bool = False):
        self.run_dir, self.writes, self.keep = Path(run_dir), writes, keep
        # the canary release: its change along the run's first ``directions`` directions, and the release itself
        # only with ``keep_release`` (a second noisy copy of the real clients' sum, which the budget must then count)
        self.seed, self.directions, self.keep_release = seed, directions, keep_release

    @classmethod
    def of_training(cls, cfg: ExperimentConfig) -> RunArchive:
        """A training run's archive: it writes the clients' updates when a method scores them or
        ``audit.keep_updates`` asks for them, a federated run only; with canary clients, each round's canary release
        along the directions the client-level audit reads (its canaries' and ``unseen`` more)."""
        federated = cfg.strategy.name != CENTRALIZED
        wanted = bool(scoring_updates(cfg)) or cfg.audit.keep_updates
        audit = method_configs(cfg).get("canary_clients")
        unseen = audit.unseen if audit is not None else AUDIT_METHODS["canary_clients"].Config().unseen
        return cls(cfg.run_dir, writes=federated and wanted, keep=cfg.audit.keep_updates, seed=cfg.seed,
                   directions=cfg.data.audit_canary_clients + unseen,
                   keep_release=audit is not None and audit.keep_release)

    @property
    def keeps_updates(self) -> bool:
        """Whether the clients' updates stay once their round is audited (always, in a run this one does not
        train)."""
        return self.keep or not self.writes

    def updates_dir(self, server_round: int) -> Path:
        return self.run_dir / f"round_{server_round}" / UPDATES

    def global_adapter(self, server_round: int) -> dict | None:
        path = adapter_file(self.run_dir, server_round)
        return load_file(str(path)) if path.is_file() else None

    def _canary_release_file(self, server_round: int) -> Path:
        return self.run_dir / f"round_{server_round}" / CANARY_RELEASE / "adapter_model.safetensors"

    def canary_projections(self, server_round: int) -> dict | None:
        path = self.run_dir / f"round_{server_round}" / CANARY_PROJECTIONS
        return json.loads(path.read_text()) if path.is_file() else None

    def save_canary_release(self, server_round: int, release: dict, start: dict, scale: dict) -> None:
        """What the client-level audit reads of the round's canary release, written before the round is audited:
        its change from the round's global model ``start`` along each direction (``dots``), that change's norm and
        size, and the release's ``scale`` (``fedmem.federation.canary_clients.release_scale``). The release itself
        is written only where asked (``keep_release``)."""
        from fedmem.engine.directions import along, flat

        change = flat(release) - flat(start)
        atomic_write_json(self.run_dir / f"round_{server_round}" / CANARY_PROJECTIONS,
                          {"dots": along(change, self.seed, self.directions).tolist(),
                           "norm": float(np.linalg.norm(change)), "size": int(change.size), **scale})
        if self.keep_release:
            with atomic_path(self._canary_release_file(server_round)) as tmp:
                save_file({k: v.contiguous() for k, v in release.items()}, str(tmp))

    def _update_files(self, server_round: int) -> dict[int, Path]:
        folder = self.updates_dir(server_round)
        files = folder.glob("client_*.safetensors") if folder.is_dir() else ()
        return {int(p.stem.removeprefix("client_")): p for p in files}

    def client_updates(self, server_round: int) -> dict[int, dict] | None:
        files = self._update_files(server_round)
        return {client: load_file(str(path)) for client, path in sorted(files.items())} or None

    def update_bytes(self, server_round: int) -> int:
        return sum(p.stat().st_size for p in self._update_files(server_round).values())

    def save_updates(self, server_round: int, states: dict[int, dict]) -> None:
        """Each client's update of ``server_round`` (``{client: adapter state}``), as the server received it."""
        for client, state in states.items():
            with atomic_path(self.updates_dir(server_round) / f"client_{client}.safetensors") as tmp:
                save_file({k: v.contiguous() for k, v in state.items()}, str(tmp))

    def audited(self, server_round: int) -> None:
        """``server_round`` has been audited: its clients' updates go unless kept (a run that writes them only)."""
        if not self.keeps_updates:
            shutil.rmtree(self.updates_dir(server_round), ignore_errors=True)

    def kept_rounds(self) -> list[int]:
        """The rounds whose clients' updates are on disk."""
        return sorted(int(p.parent.name.removeprefix("round_")) for p in self.run_dir.glob(f"round_*/{UPDATES}")
                      if any(p.glob("client_*.safetensors")))


def check_kept_updates(cfg: ExperimentConfig, run: Path, rounds: list[int]) -> None:
    """A re-audit with a method that scores the clients' updates needs a federated run that kept them for every
    audited round after round 0 (round 0 has none: nothing was trained); refused in one line otherwise."""
    needing = scoring_updates(cfg)
    if not needing or cfg.strategy.name == CENTRALIZED:  # a centralized run has no clients: the method says so
        return
    kept = set(RunArchive(run).kept_rounds())
    missing = [r for r in rounds if r > 0 and r not in kept]
    if missing:
        raise ValueError(f"audit.methods {needing} score each client's update of a round, and run={run} kept none for "
                         f"round(s) {missing}: train it with audit.keep_updates=true to audit it so")


def check_no_updates_needed(cfg: ExperimentConfig) -> None:
    """An audit of a model fedmem did not train has no clients' updates: a method that scores them is refused."""
    needing = scoring_updates(cfg)
    if needing:
        raise ValueError(f"audit.methods {needing} score each client's update of a round, which only a federated run "
                         "fedmem trains keeps: leave them out of an audit of a model fedmem did not train")
