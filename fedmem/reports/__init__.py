"""What a run shows: the console line (``console``), each round's ``report.json`` and pages and the run page
(``pages``), the sweep tables (``sweep``), and the views that render each audit method's declared figures
(``views``). Reads results; computes no audit. May import ``fedmem.audit`` (the figures methods declare),
``fedmem.federation`` (strategy names), ``fedmem.common``."""
