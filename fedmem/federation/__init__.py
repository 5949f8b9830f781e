"""Federated training's rules, as plain functions Flower's apps call: the strategies a run can name and what
each adds to a client's local loss (``strategies``), which replies count and when a round fails, and how the
clients' train metrics combine (``rounds``). Knows nothing of Flower itself (only ``clients/`` and ``server/``
import it); may import ``fedmem.common`` and ``fedmem.engine``."""
