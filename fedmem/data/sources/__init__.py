"""Data sources: each module here defines one source's config (its settings, checks and loader) and registers it
under its ``data.source`` name. Importing this package imports every module in it, so a new source is one module
here (or in a plugin) and its YAML in ``conf/data/``, listed nowhere else."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
