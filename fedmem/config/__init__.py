"""The experiment's one config: every section typed and validated once into ``ExperimentConfig``
(``experiment``), composed by Hydra from conf/ with its override grammar for a run, and over a run's saved config
for a re-audit (``compose``). Built from the registries below it (audit methods, data sources and tasks,
strategies, the engine's settings); imports nothing that runs an experiment or shows one."""

from fedmem.config.compose import (
           compose_dict,
           compose_over,
           conf_dir,
           load_config,
           register_schemas,
           schemas,
)
from fedmem.config.experiment import (
           ExperimentConfig,
           from_dict,
           method_configs,
           read_config,
           write_config,
)

__all__ = ["ExperimentConfig", "compose_dict", "compose_over", "conf_dir", "from_dict", "load_config",
           "method_configs", "read_config", "register_schemas", "schemas", "write_config"]
