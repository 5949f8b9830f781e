"""Random unit directions in an adapter's parameter space, the same in every process from the run's seed.

A canary client's update is one of them (``fedmem.federation.canary_clients``) and the client-level audit measures the
canary release's change along each (``fedmem.audit.canary_clients``): both must draw the same vector from the seed and
the direction's index alone, whichever process (a Ray actor, the server) asks. A direction is drawn uniformly on the
unit sphere of the flattened adapter (a standard normal vector over every weight, normalised), the weights taken in
the order of their sorted names, so the draw does not depend on the order a state dict lists them in.
"""

from __future__ import annotations

import numpy as np
import torch

from fedmem.data.seeding import stream_seed


def flat(state: dict[str, torch.Tensor]) -> np.ndarray:
    """An adapter state (or a difference of two) as one float64 vector, weights in sorted name order."""
    return np.concatenate([state[k].detach().double().cpu().numpy().ravel() for k in sorted(state)])


def unit_direction(seed: int, index: int, size: int) -> np.ndarray:
    """Direction ``index`` of the run seeded ``seed`` in a space of ``size`` weights (float64, norm 1)."""
    v = np.random.default_rng(stream_seed(seed, "canary-direction", index)).standard_normal(size)
    return v / np.linalg.norm(v)


def along(vector: np.ndarray, seed: int, count: int) -> np.ndarray:
    """``vector``'s dot product with each of the run's first ``count`` directions. Each is taken alone, so a dot
    product has the same bits whatever else is computed with it (a re-audit of one round reads the run's figures)."""
    return np.array([float(vector @ unit_direction(seed, j, len(vector))) for j in range(count)])


def as_state(vector: np.ndarray, like: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``vector`` (laid out as :func:`flat` lays ``like`` out) cut back into ``like``'s weights, dtypes and shapes."""
    out, at = {}, 0
    for k in sorted(like):
        n = like[k].numel()
        out[k] = torch.from_numpy(vector[at:at + n].reshape(tuple(like[k].shape))).to(like[k].dtype)
        at += n
    return out
