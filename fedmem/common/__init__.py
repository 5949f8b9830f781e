"""Helpers every part of fedmem uses: atomic file output and JSON (``io``), config fields and their checks
(``fields``), how numbers read (``fmt``), progress bars (``progress``), the registries' rules (``registry``), the
exact privacy of composed Gaussian mechanisms (``accounting``).
Imports nothing else of fedmem."""
