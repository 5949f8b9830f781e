"""The helpers every config class in fedmem uses: fields with help text, type checks, building a section.

Hydra composes conf/ into a plain dict; each section becomes a typed dataclass (the engine's, the audit's, a
method's, a data source's, a strategy's). A field's annotation is
its contract: :func:`check_fields` rejects a value of the wrong type, or a choice outside a ``Literal``, with one
message naming the key, so a wrong config fails before any data is loaded or any model is trained. Checks that
involve several fields live in each ``__post_init__``. This module imports nothing else of fedmem: every layer
may read it.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import types
import typing
from collections.abc import Sequence
from dataclasses import field
from typing import Any, Literal

# ---------------------------------------------------------------- field helpers and type checks


def option(default, help: str):
    """A config field with its help text (kept in the field's metadata)."""
    return field(default=default, metadata={"help": help})


def option_factory(default, help: str):
    """A config field whose default is a fresh deep copy of a list or dict (never shared between instances)."""
    return field(default_factory=lambda: copy.deepcopy(default), metadata={"help": help})


def field_default(f: dataclasses.Field):
    """A field's default value (a fresh one from its factory), or ``dataclasses.MISSING`` when it has none."""
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def build_variant(cls, settings: dict[str, Any], key: str, variants: dict[str, type], selector: str):
    """``cls`` (one of the registered ``variants``, by name: a data source, a strategy) from ``settings``. A setting
    that belongs to another variant is refused by name, saying which variant reads it, unless it holds that
    variant's default (a config written before each variant had settings of its own holds them all)."""
    own = {f.name for f in dataclasses.fields(cls)}
    mine = {}
    for name, value in settings.items():
        readers = {v: default for v, other in variants.items() for f in dataclasses.fields(other)
                   if f.name == name and (default := field_default(f)) is not dataclasses.MISSING}
        if name in own or not readers:
            mine[name] = value  # its own, or unknown to every variant: build_section names it
        elif value not in readers.values():
            raise ValueError(f"{key}.{name} is not used by {key}.{selector}={settings.get(selector)}; it is a setting "
                             f"of {key}.{selector}={' or '.join(sorted(readers))}")
    return build_section(cls, mine, key)


def section(cls, help: str):
    """A nested config section (a dataclass field), built from its defaults unless given."""
    return field(default_factory=cls, metadata={"help": help})


def _describe(hint) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return "one of " + ", ".join(map(str, args))
    if origin in (typing.Union, types.UnionType):
        kinds = [_describe(a) for a in args if a is not type(None)]
        return " or ".join(kinds) + (" or null" if type(None) in args else "")
    if origin in (list, tuple):
        return f"a list of {_describe(args[0]).removeprefix('a ').removeprefix('an ')}s" if args else "a list"
    return {bool: "true or false", int: "an integer", float: "a finite number", str: "a string", dict: "a mapping"}.get(
        origin or hint, getattr(hint, "__name__", str(hint)))


def _matches(value, hint) -> bool:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a) for a in args)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:  # a finite number: no setting is honoured by NaN or an infinity (a learning rate of nan trains
        # nothing, and every comparison with it is false, so range checks would let it through)
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is str:
        return isinstance(value, str)
    if origin in (list, tuple) or hint in (list, tuple):
        ok = isinstance(value, Sequence) and not isinstance(value, str)
        return ok and (not args or all(_matches(v, args[0]) for v in value))
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    if dataclasses.is_dataclass(hint):
        return isinstance(value, (hint, dict))
    return True


def check_fields(obj, key: str) -> None:
    """Check every field of dataclass ``obj`` against its annotation; ``key`` is its place in the config."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if not _matches(value, hints[f.name]):
            raise ValueError(f"{key}.{f.name} must be {_describe(hints[f.name])}, got {value!r}")


def build_section(cls, d: dict[str, Any] | None, key: str):
    """``cls(**d)`` after rejecting keys the section does not have (a misspelt override must not pass silently)."""
    d = dict(d or {})
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ValueError(f"{key}: unknown option(s) {unknown}; known: {sorted(known)}")
    return cls(**d)


def positive(obj, key: str, *names: str) -> None:
    """Each named field of ``obj`` must be >= 1 (sizes, counts)."""
    for name in names:
        if getattr(obj, name) < 1:
            raise ValueError(f"{key}.{name} must be >= 1, got {getattr(obj, name)!r}")


def config_leaves(d: dict, prefix: str = "") -> dict[str, Any]:
    """A nested config as ``{"a.b": value}`` (lists as JSON text, so that every value compares and hashes)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out |= config_leaves(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = json.dumps(v) if isinstance(v, (list, dict)) else v
    return out
