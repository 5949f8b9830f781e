"""The experiment's one config: every section typed and validated once into ``ExperimentConfig``
(``experiment``), composed by Hydra from conf/ with its override grammar for a run, and over a run's saved config
for a re-audit (``compose``). Built from the registries below it (audit methods, data sources and tasks,
strategies, the engine's settings); imports nothing that runs an experiment or shows one."""
