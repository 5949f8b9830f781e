"""Running an experiment: a run's lifecycle (status marker, resume, failure; ``lifecycle``), what a round does
on the model and data (``runtime``), the per-round audit that writes the reports (``auditor``), and audits of saved
rounds or any model (``reaudit``). The top of fedmem below the command line: it may import every other part;
``clients/`` and ``server/`` (the Flower apps) call it, and it never imports them."""
