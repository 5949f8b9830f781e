"""Running an experiment: what a process loads once (``loading``: data, base model, the audit plan), training
(``training``: a client's round, the centralized baseline), the per-round audit that writes the reports and its
factories (``auditor``), the checks before a run (``preflight``), a run's lifecycle (status marker, resume, failure;
``lifecycle``), a sweep's jobs under Hydra's launchers (``sweeps``), and audits of saved rounds or any model
(``reaudit``). Following one run's config goes down these layers: lifecycle -> training -> auditor -> loading. The
top of fedmem below the command line: it may import every other part; ``clients/`` and ``server/`` (the Flower apps)
call it, and it never imports them."""
