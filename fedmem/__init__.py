"""fedmem: memorization audits of language models fine-tuned with federated learning.

The package's parts, each a folder whose ``__init__`` says what it owns, from the bottom up: ``common`` (helpers),
``data`` (tasks, sources, partitions), ``engine`` (model loading, training, decoding, scoring), ``federation``
(strategies and round rules), ``audit`` (the audit methods), ``reports`` (console, pages, sweep tables, views),
``config`` (the one experiment config), ``experiment`` (running a run or a re-audit), and ``cli``. A part imports
only parts below it; ``tests/test_layering.py`` holds the allowed directions.
"""
