"""Named, independent random streams derived from one seed (stable across processes and Python versions)."""

from __future__ import annotations

import hashlib
import random


def stream_seed(seed: int, *names) -> int:
    key = "/".join([str(int(seed)), *map(str, names)])
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def rng_for(seed: int, *names) -> random.Random:
    """``random.Random`` for the stream ``names`` of ``seed``: streams never share draws."""
    return random.Random(stream_seed(seed, *names))
