"""The detector's verdicts on real audit pairs do not move: the fast batch path must type every pair of a saved
audit round exactly as the detector did when the pairs were recorded.

The fixture holds the (generation, retrieved suffix) pairs of random prefixes of one paper-scale round of
``bench/round.py`` (the tiny preset's generations, top-10 suffixes of every client), with the verdicts of
one ``detect`` call per pair, recorded before the detector's speed work:

    python bench/round.py --n 4000 --skip-round --ref-prefixes 200 --dump-pairs tests/fixtures/detector_round_pairs.json.gz
"""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


FIXTURE = Path(__file__).parent / "fixtures" / "detector_round_pairs.json.gz"


def test_batch_verdicts_on_recorded_round_pairs_are_unchanged(detector):
    with gzip.open(FIXTURE, "rt") as f:
        data = json.load(f)
    texts = data["texts"]
    pairs = [(texts[g], texts[s]) for g, s, _ in data["pairs"]]
    expected = [c for _, _, c in data["pairs"]]
    assert len(pairs) >= 3000 and len(set(expected)) >= 3  # the fixture exercises more than the no-seed path
    got = [d.category for d in detector.detect_batch(pairs)]
    changed = Counter((e, g) for e, g in zip(expected, got) if e != g)
    assert not changed, f"verdicts moved on {sum(changed.values())} of {len(pairs)} pairs: {dict(changed)}"
