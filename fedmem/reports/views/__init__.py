"""Views: how audit sections read on the pages. Importing this package registers every view module in it (a module
beside ``base.py`` is found without being listed anywhere)."""

import importlib
import pkgutil

from fedmem.reports.views.base import (  # noqa: F401
    VIEWS,
    Panel,
    View,
    headline_text,
    register_view,
    view_for,
)

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")
