"""The registries' two rules, once: a name is claimed by one item only, and an unknown name is one error line
naming the known ones (audit methods, views, data sources, tasks, strategies)."""

from __future__ import annotations

from typing import Any


def add(registry: dict[str, Any], name: str, item: Any, what: str) -> Any:
    """``item`` under ``name``; the same item again is a no-op (a module imported twice), another one an error."""
    if name in registry and registry[name] is not item and registry[name] != item:
        raise ValueError(f"{what} {name!r} is registered twice")
    registry[name] = item
    return item


def named(registry: dict[str, Any], name: str, key: str, what: str) -> Any:
    """The item registered under ``name``, which the config's ``key`` gave."""
    if name not in registry:
        raise ValueError(f"{key}: unknown {what} {name!r}; known: {sorted(registry)} (a {what} of your own: register "
                         f"it in a module listed in plugins)")
    return registry[name]
