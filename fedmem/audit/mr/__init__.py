"""MR, the cross-client memorization ratio (SPEC §3) and its control (SPEC §3b), with everything it is made of:

- ``method``: the audit method (generation, the arms, figures, records);
- ``stats``: MR's aggregates and their intervals from a hit table;
- ``suffix_index`` and ``lucene``: each client's BM25 index, ranking as Lucene 9 and Elasticsearch do;
- ``suffix_match``: retrieval then the detector, for any texts (generations, the data's floor);
- ``shared_text``: shared passages by exact search over every client's training texts;
- ``detector``: the PAN2014 text-alignment discriminator with Lee et al.'s typing.

Nothing outside this package knows these parts: other code asks the method (``MemorizationRatio``)."""

from fedmem.audit.mr.method import MemorizationRatio, MRConfig  # noqa: F401  (registers the method)
