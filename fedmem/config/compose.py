"""Hydra composition of the one config tree, conf/: a run's config from the defaults and its overrides, and a
re-audit's from a run's saved config and its overrides, both through Hydra's compose API and override grammar.

Every default lives once, in a config dataclass: :func:`schemas` stores them in Hydra's ConfigStore, the root's as
``schema`` and each group's as ``schema`` (``<name>_schema`` for a data source or a strategy), and a preset in
conf/ extends its schema and lists only what it changes.
"""

from __future__ import annotations

import dataclasses
import os
from importlib import resources
from pathlib import Path
from typing import Any

from fedmem.audit import AUDIT_METHODS
from fedmem.audit.config import AuditConfig
from fedmem.common.fields import config_leaves, field_default
from fedmem.config.experiment import (
    ExperimentConfig,
    SimulationConfig,
    from_dict,
    import_plugins,
    read_config,
)
from fedmem.data import DATA_SOURCES, TaskConfig
from fedmem.engine.config import Decoding, TrainConfig
from fedmem.federation.privacy import DefenseConfig
from fedmem.federation.strategies import STRATEGIES
from fedmem.tracking.config import TrackerConfig

# what a re-audit may change: the audit's settings and the experiment preset (which sets audit rules only)
REAUDIT_KEYS = ("audit.", "audit/", "experiment")


def _unless(other: Any, value: Any) -> Any:
    """``${fedmem.unless:${model.path},'file.gguf'}`` in a preset: its value unless the user set the other key, so
    that a preset follows what the user named (a model directory typed on the command line replaces the preset's
    GGUF file, instead of both naming the base model)."""
    return value if other is None else None


def _register_resolvers() -> None:
    """At import, so that every process that composes or resolves a config (a sweep's workers too) has them."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("fedmem.unless"):
        OmegaConf.register_new_resolver("fedmem.unless", _unless)


_register_resolvers()


def conf_dir() -> str:
    """The config tree: $FEDMEM_CONF if set, else the one shipped in the package (conf/ of a checkout)."""
    env = os.environ.get("FEDMEM_CONF")
    if env:
        return str(Path(env).resolve())
    return str(resources.files("fedmem.conf"))


def defaults_of(cls) -> dict[str, Any]:
    """A config dataclass's defaults as plain data (nested sections as dicts), without running its checks."""
    out = {}
    for f in dataclasses.fields(cls):
        value = field_default(f)
        if dataclasses.is_dataclass(value):
            value = dataclasses.asdict(value)
        if value == {}:  # null, not an empty mapping: Hydra's struct mode refuses keys an override adds to one
            value = None
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def schemas() -> dict[str, dict[str, Any]]:
    """Every config group's defaults from its dataclass, by the group's package in conf/ (``task``,
    ``data/synthetic``, ``strategy/fedprox``, ``audit/decoding``), and the root's (``""``)."""
    # every registered method's settings sit under audit.<name> in the root schema, so that
    # `audit.<name>.<key>=...` overrides any method's setting, a plugin's included, with no YAML of its own
    methods = {name: defaults_of(m.Config) for name, m in AUDIT_METHODS.items() if m.Config is not dict}
    shared = {k: v for k, v in defaults_of(AuditConfig).items() if k not in ("sections", "decoding")}
    out = {"": {"seed": 0, "plugins": [], "experiment": "none", "train": defaults_of(TrainConfig),
                "simulation": defaults_of(SimulationConfig), "audit": shared | methods},
           "task": defaults_of(TaskConfig), "defense": defaults_of(DefenseConfig),
           "tracker": defaults_of(TrackerConfig), "audit/decoding": defaults_of(Decoding)}
    out |= {f"data/{name}": {**defaults_of(cls), "source": name} for name, cls in DATA_SOURCES.items()}
    out |= {f"strategy/{name}": {**defaults_of(s.Config), "name": name} for name, s in STRATEGIES.items()}
    return out


def register_schemas(overrides: list[str] = ()) -> None:
    """Store :func:`schemas` in Hydra's ConfigStore before a composition reads conf/. The plugins an override names
    (``plugins=[...]``) are imported first, so that their methods' and sources' schemas are there for their YAML and
    overrides."""
    from hydra.core.config_store import ConfigStore
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for override in OverridesParser.create().parse_overrides([o for o in overrides if o.startswith("plugins=")]):
        import_plugins(override.value())

    store = ConfigStore.instance()
    for package, node in schemas().items():
        group, _, variant = package.partition("/") if package.startswith(("data/", "strategy/")) else (package, "", "")
        store.store(name=f"{variant}_schema" if variant else "schema", group=group or None, node=node)
    _local_submitit_folder(store)


def _local_submitit_folder(store) -> None:
    """``hydra/launcher=submitit_local`` with its job files in ``<sweep>/.submitit``. Its default folder,
    ``.submitit/%j``, is a pattern that submitit's SLURM jobs fill with their job id, but its local executor also
    creates it literally, leaving an empty ``%j`` folder in the sweep directory. Nothing without the plugin. Stored
    after Hydra's scan of its plugins, which runs each plugin's module again, storing its own defaults."""
    from hydra.core.plugins import Plugins

    Plugins.instance()
    try:
        from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf
    except ImportError:
        return
    store.store(group="hydra/launcher", name="submitit_local", provider="submitit_launcher",
                node=LocalQueueConf(submitit_folder="${hydra.sweep.dir}/.submitit"))


def _compose(config_name: str, overrides: list[str], hydra_config: bool = False):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=conf_dir(), version_base="1.3"):
        return compose(config_name=config_name, overrides=overrides, return_hydra_config=hydra_config)


def compose_dict(overrides: list[str] | None = None) -> dict:
    """The config tree composed with ``overrides`` into a plain dict (``resolve``, ``data check``, tests)."""
    from omegaconf import OmegaConf

    register_schemas(list(overrides or []))
    d = OmegaConf.to_container(_compose("config", list(overrides or [])), resolve=True)
    d.pop("hydra", None)
    return d


def _groups() -> dict[str, str]:
    """The config groups of conf/config.yaml's defaults list, with the package each fills (Hydra's own record of
    the choices it composed: ``audit/decoding@audit.decoding`` -> ``audit.decoding``)."""
    choices = _compose("config", [], hydra_config=True).hydra.runtime.choices
    return {key: key.partition("@")[2] or key.partition("@")[0].replace("/", ".")
            for key in choices if not key.startswith("hydra/")}


def override_problems(overrides: list[str]) -> list[str]:
    """What Hydra would refuse in ``overrides``, every problem at once, each in one line naming what the user typed:
    a preset that does not exist (with the group's presets), a key that is no setting (with the nearest ones, or the
    preset of its group that has it). Sweep values (``a,b``) are each checked; ``hydra.*`` and ``+``/``~`` overrides
    are left to Hydra. Empty when Hydra will compose them."""
    import difflib

    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as e:
        return [f"{str(e).splitlines()[0]}"]
    register_schemas(list(overrides))
    groups = {**_groups(), "experiment": "experiment"}
    presets = {g: sorted(p.stem for p in (Path(conf_dir()) / g.replace(".", "/")).glob("*.yaml")) for g in groups}
    problems, chosen = [], []
    for o in parsed:
        key = o.key_or_group
        if key.startswith("hydra") or o.is_add() or o.is_delete():
            continue
        values = list(o.sweep_string_iterator()) if o.is_sweep_override() else [str(o.value())]
        if key in groups:
            missing = [v for v in values if v not in presets[key] and not (key == "experiment" and v == "none")]
            if missing:
                problems.append(f"{key}={','.join(missing)}: no such preset of {key}; known: {', '.join(presets[key])}")
            else:
                chosen.append(f"{key}={values[0]}")
    if problems:
        return problems
    tree = compose_dict(chosen)
    variants = {name: d for name, d in schemas().items() if "/" in name}
    for o in parsed:
        key = o.key_or_group
        if key.startswith("hydra") or o.is_add() or o.is_delete() or key in groups:
            continue
        node, parts = tree, key.split(".")
        for i, part in enumerate(parts):
            if isinstance(node, dict) and part in node:
                node = node[part]
                continue
            if not isinstance(node, dict) or node is None:
                break  # a value set inside a setting that is not a section (a mapping given whole): Hydra's call
            where = ".".join(parts[:i])
            owners = [name.replace("/", "=") for name, d in variants.items()
                      if name.split("/")[0] == where and part in d and i == len(parts) - 1]
            near = difflib.get_close_matches(part, list(node), n=3, cutoff=0.6)
            line = f"{key} is not a setting"
            if owners:
                line += (f" of {where}={tree[where].get('source') or tree[where].get('name')}; {part} is a setting of "
                         f"{' and '.join(owners)}: choose {' or '.join(owners)}")
            elif near:
                line += f"; did you mean {' or '.join(f'{where}.{n}' if where else n for n in near)}?"
            else:
                line += f"; {where or 'the config'} has: {', '.join(sorted(node))}"
            problems.append(line)
            break
    return problems


def compose_over(saved: dict, overrides: list[str]) -> dict:
    """A re-audit's config: a run's saved (resolved) config with ``overrides`` applied by Hydra's compose API, a
    dotted key setting a value (``audit.prefix_len=10``) and a group's preset (``audit/decoding=top_p``,
    ``experiment=paper``) merging over the saved values at its place. A change to anything that shaped training is
    refused, naming the key."""
    from hydra.core.config_store import ConfigStore
    from hydra.errors import ConfigCompositionException, MissingConfigException
    from omegaconf import OmegaConf

    for override in overrides:
        key = override.partition("=")[0].lstrip("+~")
        if not key.startswith(REAUDIT_KEYS):
            raise ValueError(f"{key}: shaped training and cannot change in a re-audit (only audit.*, audit/<group> and "
                             f"experiment may); train a new run instead")
    register_schemas(overrides)
    groups = _groups()
    store = ConfigStore.instance()
    store.store(name="fedmem_saved_run", node=saved)
    # the root schema (every registered method's settings, one added since the run included), the saved config over
    # it, then any group an override selects (none by default: each group is null)
    store.store(name="fedmem_over_saved_run", node={"defaults": ["schema", "fedmem_saved_run", "_self_",
                                                                  *({g: None} for g in groups)]})
    try:
        d = OmegaConf.to_container(_compose("fedmem_over_saved_run", overrides), resolve=True)
    except MissingConfigException as e:  # a preset that does not exist: named as the user wrote it
        group, _, name = (e.missing_cfg_file or "").rpartition("/")
        known = sorted(o for o in (e.options or []) if o != "schema")
        raise ValueError(f"{group}={name}: no such preset; known: {known}") from None
    except ConfigCompositionException as e:
        presets = [o for o in overrides if o.partition("=")[0] in ("experiment", *groups)]
        if not presets:
            raise
        raise ValueError(f"{' '.join(presets)}: {str(e).splitlines()[0]} (a study preset composes other presets and "
                         f"sweeps training settings: re-audit with its audit settings as overrides instead)") from None
    before, after = config_leaves(saved), config_leaves(d)
    changed = sorted(k for k in before if before[k] != after.get(k) and not k.startswith(REAUDIT_KEYS))
    if changed:
        key = changed[0]  # a preset that reaches past the audit's rules (a study preset)
        raise ValueError(f"{key}: shaped training and cannot change in a re-audit, and {' '.join(overrides)} changes "
                         f"it: re-audit with the preset's audit settings as overrides instead, or train a new run")
    return d


def load_config(path: str | os.PathLike | None) -> ExperimentConfig:
    """A run's resolved config (``config.yaml``), validated; empty: the defaults (``flwr run .`` without a run
    config)."""
    if not path:
        return from_dict({**compose_dict([]), "run_dir": "runs/flwr-default"})
    return read_config(path)
