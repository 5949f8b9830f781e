"""Seeded English-like text for the benches and the tests: sentences from four short word lists, and paragraphs
of them. Shared by both, so it lives here (tests may import bench; a bench never imports tests)."""

from __future__ import annotations

import numpy as np

SUBJECTS = ["The patient", "Our team", "The galaxy", "A doctor", "The committee", "This model", "The river", "A farmer"]
VERBS = ["reported", "observed", "described", "measured", "discovered", "remembered", "explained", "noticed"]
OBJECTS = ["a severe headache", "the faint signal", "an unusual pattern", "the new medication", "a quiet village",
           "the dark matter halo", "several old records", "a rapid change"]
TAILS = ["after three weeks.", "during the night.", "in the northern region.", "with great care.",
         "before the meeting ended.", "near the old bridge.", "under heavy rain.", "without any warning."]


def sentences(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    parts = (SUBJECTS, VERBS, OBJECTS, TAILS)
    return [" ".join(rng.choice(p) for p in parts) for _ in range(n)]


def texts(n: int, seed: int, n_sentences: int = 6) -> list[str]:
    """``n`` paragraphs of ``n_sentences`` random sentences each."""
    return [" ".join(sentences(n_sentences, seed * 1000 + i)) for i in range(n)]
