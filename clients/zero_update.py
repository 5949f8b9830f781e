"""A zero update through Flower's DP clipping. Flower 1.42 clips a model update by the ratio of the clipping norm to
the update's norm (``flwr.supercore.differential_privacy.clip_inputs_inplace``): an update of norm 0, from a client
that trained nothing (it was given a global model the noise had destroyed, and sent it back unchanged), raises
ZeroDivisionError inside the DP wrapper, or inside the clipping mod on a client. A zero update is within every
clipping norm: it is left as it is. Installed on import, once per process, by the ClientApp and the ServerApp; the
rest of Flower's clipping is unchanged."""

from __future__ import annotations

import flwr.supercore.differential_privacy as flower_dp

_clip = flower_dp.clip_inputs_inplace


def clip_inputs_inplace(input_arrays, clipping_norm: float) -> None:
    """Flower's clipping, except that an update of norm 0 is left as it is."""
    if flower_dp.get_norm(input_arrays) == 0:
        return
    _clip(input_arrays, clipping_norm)


flower_dp.clip_inputs_inplace = clip_inputs_inplace  # compute_clip_model_update looks it up in its module
