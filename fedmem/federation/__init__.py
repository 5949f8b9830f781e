"""Federated training's rules, as plain functions Flower's apps call: the strategies a run can name, each with
what it adds to a client's local loss (``strategies``; one module per strategy with a client-side term, such as
``fedprox``), which replies count, when a round fails and how the clients' train metrics combine (``rounds``),
and DP-FedAvg's settings, the Flower wrapper and client mod that apply it and the budget it spends (``privacy``).
Importing this package imports every module in it, which registers their strategies. Knows nothing of Flower
itself (only ``clients/`` and ``server/`` import it); may import ``fedmem.common`` and ``fedmem.engine``."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
